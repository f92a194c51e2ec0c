"""Writes the synthetic Azure Functions sample beside this file (seeded: the same bytes
every run). ``python tests/data/azure-sample/make_sample.py``

The files have the exact names and columns of the public Azure Functions datasets
(Azure/AzurePublicDataset; 2019: Shahrad et al., "Serverless in the Wild", USENIX ATC
2020; 2021: Zhang et al., SOSP 2021), but the values are *made up here*, shaped after what
the ATC paper reports of the real trace: ids are 64-hex HMAC-like hashes; triggers mostly
http, then timer and queue; daily calls per function spread over four orders of magnitude;
timer functions fire on a fixed period; the others follow a diurnal wave with minute-scale
bursts; median durations from 1 ms to about a minute, lognormal within a function, so the
p99 is several times the median; app memory mostly 100-400 MB. No row is a real one.
"""

from __future__ import annotations

import csv
import hashlib
import math
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINUTES = 1440
TRIGGERS = ["http"] * 11 + ["timer"] * 4 + ["queue"] * 3 + ["event", "storage", "orchestration"]
Z = (-3.0, -2.326, -0.674, 0.0, 0.674, 2.326, 3.5)  # normal quantiles of 0, 1, ..., 100 %


def hexid(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(16)).hexdigest()


def poisson(rng: random.Random, lam: float) -> int:
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def per_minute(rng: random.Random, trigger: str, daily: float) -> list[int]:
    if trigger == "timer":
        period = rng.choice([1, 2, 5, 15, 60])
        phase = rng.randrange(period)
        return [1 if m % period == phase else 0 for m in range(MINUTES)]
    shift = rng.uniform(0, MINUTES)
    wave = [1 + 0.6 * math.sin(2 * math.pi * (m - shift) / MINUTES) for m in range(MINUTES)]
    burst = [1.0] * MINUTES
    for _ in range(rng.randrange(0, 6)):  # minute-scale peaks
        start, length, factor = rng.randrange(MINUTES), rng.randint(1, 8), rng.uniform(3, 15)
        for m in range(start, min(MINUTES, start + length)):
            burst[m] = factor
    weight = [w * b for w, b in zip(wave, burst, strict=True)]
    scale = daily / sum(weight)
    return [poisson(rng, w * scale) for w in weight]


def main() -> None:
    rng = random.Random(2019)
    owners = [hexid(rng) for _ in range(30)]
    apps = [(rng.choice(owners), hexid(rng)) for _ in range(45)]
    invocations, durations = [], []
    memory = {}
    for i in range(80):
        owner, app = apps[i % len(apps)] if i < len(apps) else rng.choice(apps)
        function = hexid(rng)
        trigger = rng.choice(TRIGGERS)
        median_ms = 10 ** rng.uniform(0.0, 4.8)
        sigma = rng.uniform(0.3, 1.4)
        # Long functions are called less: at most about 0.8 of a core per function.
        most = min(4.6, math.log10(0.8 * 86400_000 / (median_ms * math.exp(sigma**2 / 2))))
        daily = 10 ** rng.uniform(0.5, max(0.6, most))
        counts = per_minute(rng, trigger, daily)
        invocations.append([owner, app, function, trigger, *counts])
        points = [median_ms * math.exp(sigma * z) for z in Z]
        average = median_ms * math.exp(sigma**2 / 2)
        durations.append(
            [owner, app, function, round(average), sum(counts), round(points[0] * 0.8)]
            + [round(points[-1] * 1.3)]
            + [round(p, 3) for p in points]
        )
        if (owner, app) not in memory:
            mb = min(1500.0, math.exp(rng.gauss(math.log(170), 0.5)))
            qs = [mb * math.exp(0.15 * z) for z in (-2.3, -1.6, -0.7, 0, 0.7, 1.6, 2.3, 3.0)]
            memory[(owner, app)] = [owner, app, rng.randint(200, 20000), round(mb, 2)] + [
                round(q, 2) for q in qs
            ]
    write(
        HERE / "invocations_per_function_md.anon.d01.csv",
        ["HashOwner", "HashApp", "HashFunction", "Trigger"] + [str(m + 1) for m in range(MINUTES)],
        invocations,
    )
    write(
        HERE / "function_durations_percentiles.anon.d01.csv",
        ["HashOwner", "HashApp", "HashFunction", "Average", "Count", "Minimum", "Maximum"]
        + [f"percentile_Average_{p}" for p in (0, 1, 25, 50, 75, 99, 100)],
        durations,
    )
    write(
        HERE / "app_memory_percentiles.anon.d01.csv",
        ["HashOwner", "HashApp", "SampleCount", "AverageAllocatedMb"]
        + [f"AverageAllocatedMb_pct{p}" for p in (1, 5, 25, 50, 75, 95, 99, 100)],
        list(memory.values()),
    )
    # 2021: one row per call over an hour, 20 functions of 12 apps.
    rows = []
    apps21 = [hexid(rng) for _ in range(12)]
    for _ in range(20):
        app, func = rng.choice(apps21), hexid(rng)
        median_s, sigma = 10 ** rng.uniform(-2.5, 1.3), rng.uniform(0.3, 1.2)
        rate = min(0.2, 0.05 / median_s) * 10 ** rng.uniform(-1.5, 0)  # calls per second
        t = 5000.0 + rng.expovariate(rate)
        while t < 5000.0 + 3600.0:
            d = round(median_s * math.exp(rng.gauss(0, sigma)), 3)
            rows.append([app, func, f"{t + d:.9f}", f"{d:.3f}"])
            t += rng.expovariate(rate)
    rows.sort(key=lambda r: float(r[2]))
    write(
        HERE / "AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt",
        ["app", "func", "end_timestamp", "duration"],
        rows,
    )


def write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


if __name__ == "__main__":
    main()
