"""Call sequences for the paper's protocol: N calls spread uniformly over a window.

Core-level intensity ``I`` is calls per core per minute, so a window of ``W`` seconds on ``C``
cores holds ``N = round(I * C * W / 60)`` calls (``I * C`` for the paper's 60 s window). Send
times are i.i.d. uniform in ``[0, W)``; functions get counts proportional to their weights
(equal by default, largest remainder), assigned to the sorted times in a random order. The
sequence depends only on (seed, intensity, repetition), so every policy replays the same one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gatling.scenario import Call


def call_count(intensity: float, cores: int, window_s: float) -> int:
    return round(intensity * cores * window_s / 60.0)


def split_counts(n: int, weights: Sequence[float]) -> list[int]:
    """``n`` split proportionally to ``weights`` (largest remainder, ties to the earlier one)."""
    total = float(sum(weights))
    if n < 0 or total <= 0 or any(w < 0 for w in weights):
        raise ValueError("need n >= 0 and non-negative weights with a positive sum")
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def sequence_seed(seed: int, intensity: float, repetition: int) -> str:
    # str seeds are hashed with SHA-512 by random.Random: stable across runs and platforms
    return f"ow-invoker:{seed}:{intensity:g}:{repetition}"


def uniform_calls(
    actions: Sequence[str],
    params: Mapping[str, dict[str, Any]],
    *,
    intensity: float,
    cores: int,
    window_s: float = 60.0,
    seed: int = 0,
    repetition: int = 0,
    weights: Sequence[float] | None = None,
) -> list[Call]:
    """The call sequence for one (intensity, repetition)."""
    if not actions:
        raise ValueError("no actions")
    if window_s <= 0 or cores <= 0:
        raise ValueError("window and cores must be positive")
    rnd = random.Random(sequence_seed(seed, intensity, repetition))
    n = call_count(intensity, cores, window_s)
    counts = split_counts(n, weights or [1.0] * len(actions))
    funcs = [a for a, k in zip(actions, counts, strict=True) for _ in range(k)]
    rnd.shuffle(funcs)
    times = sorted(rnd.uniform(0.0, window_s) for _ in range(n))
    return [
        Call(i, t, f, dict(params.get(f, {})))
        for i, (t, f) in enumerate(zip(times, funcs, strict=True))
    ]
