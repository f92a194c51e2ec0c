"""The live console (docs/console.md) in a real headless Chromium against a real standalone.

``console_flow.js`` drives Debian's chromium with playwright-core: it creates two CPU-bound
actions in the browser, invokes them, and sends bursts of calls on one action core under FC,
so the calls wait in the queue view with their priorities, then run on the core, and the
histograms fill in. It saves a screenshot (``test-output/console/console.png``, git-ignored;
docs/figures/console.png is one of these) and prints what the page showed."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.processes import ROOT, free_port, running_platform

pytestmark = pytest.mark.services

BROWSER_MODULES = ROOT / ".cache" / "browser" / "node_modules"
CHROMIUM = Path(os.environ.get("OW_CHROMIUM", "/usr/bin/chromium"))
CHART_JS = ROOT / ".cache" / "console" / "node_modules" / "chart.js" / "dist" / "chart.umd.min.js"
OUTPUT = ROOT / "test-output" / "console"
BURST = 3  # calls of each action per burst, as console_flow.js sends them


@pytest.fixture(scope="module")
def browser() -> dict[str, str]:
    """The environment console_flow.js needs: Debian's chromium and playwright-core."""
    if not CHROMIUM.exists() or not (BROWSER_MODULES / "playwright-core").is_dir():
        pytest.fail("chromium or playwright-core is missing: run `scripts/install.sh browser`")
    if not CHART_JS.is_file():
        pytest.fail("the console's Chart.js is missing: run `scripts/install.sh console`")
    return {**os.environ, "NODE_PATH": str(BROWSER_MODULES), "CHROMIUM": str(CHROMIUM)}


def _get(url: str, auth: str | None = None) -> tuple[int, object]:
    req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_console_creates_invokes_and_shows_the_queue_cores_and_histograms(browser, tmp_path):
    admin_port = free_port()
    extra = ("--policy", "fc", "--action-cores", "1", "--admin-port", str(admin_port))
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with running_platform("embedded", tmp_path, extra=extra) as platform:
        status, body = _get(platform.url + "/console/api/scheduler")
        assert status == 401, body  # the view takes an API key, as the REST API does
        assert platform.state is not None
        password = (platform.state / "admin.password").read_text().strip()
        admin_auth = "Basic " + base64.b64encode(f"invoker.user:{password}".encode()).decode()
        p = subprocess.run(
            ["node", str(Path(__file__).with_name("console_flow.js"))],
            env={
                **browser,
                # As the standalone prints it: the key in the fragment, never served.
                "CONSOLE_URL": f"{platform.url}/console#auth={platform.auth}",
                "OUT_DIR": str(OUTPUT),
                "PROFILE_DIR": str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            },
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert p.returncode == 0, f"console_flow.js failed:\n{p.stderr[-4000:]}\n{p.stdout}"
        out = json.loads(p.stdout)
        status, node = _get(f"http://127.0.0.1:{admin_port}/scheduler", admin_auth)
    print(f"\nconsole screenshots: {out['screenshot']} {out['finalScreenshot']}")

    assert out["errors"] == [], out["errors"]  # no script error, no failed load
    assert out["policy"] == "fc" and out["keyPrefilled"] and not out["chartsMissing"]
    for name in ("slow", "quick"):
        assert out["created"][name].startswith(f"saved {name}")
        invoked = out["invoked"][name]
        assert invoked["message"].startswith(f"{name}: success")
        assert invoked["result"]["result"]["spins"] > 0 and invoked["result"]["activationId"]

    # While the second burst waited: the queue in FC order, ranks 1..n, priorities rising,
    # every row one of the burst's calls; the single action core runs one CPU-bound call.
    seen = out["whileQueued"]
    burst = {i for ids in out["bursts"][1].values() for i in ids}
    queue = seen["queue"]
    assert len(queue) >= BURST
    assert [row["rank"] for row in queue] == [str(n) for n in range(1, len(queue) + 1)]
    priorities = [float(row["priority"]) for row in queue]
    assert priorities == sorted(priorities) and priorities[0] > 0
    assert {row["id"] for row in queue} <= burst
    (core,) = seen["cores"]
    (running,) = core["calls"]
    share = re.search(r"share (\d+\.\d+)", running["text"])
    assert running["id"] in burst and share and float(share[1]) > 0.9  # CPU-bound: a core
    # FC: a quick call's priority (#recent calls x 0.3 s) is below every slow one's.
    quick = [float(r["priority"]) for r in queue if r["function"] == "guest/quick"]
    slow = [float(r["priority"]) for r in queue if r["function"] == "guest/slow"]
    assert quick and slow and max(quick) < min(slow)
    # The memory line: the running call at its limit (256 MB), the kept containers beside it.
    memory = {k: int(v) for k, v in seen["memory"].items() if k != "text"}
    assert memory["used"] - memory["kept"] >= 256 and memory["used"] <= memory["user"]
    assert f"{memory['used']} of {memory['user']} MB" in seen["memory"]["text"]

    # Calls passed through the queue view and then ran on the core.
    through = set(out["queued"]) & set(out["onCore"])
    assert through & set(out["bursts"][1]["slow"]), (out["queued"], out["onCore"])

    calls = 1 + 2 * BURST  # the first invoke and two bursts
    assert out["final"]["queue"] == []
    final = out["final"]["memory"]  # nothing runs: only kept containers, slow's and quick's
    assert final["used"] == final["kept"] and int(final["keptContainers"]) >= 2, final
    assert out["final"]["functions"] == {"guest/slow": calls, "guest/quick": calls}
    charts = out["charts"]
    assert charts["response"] == {"guest/slow": calls, "guest/quick": calls}
    assert charts["stretch"] == {"guest/slow": calls, "guest/quick": calls}
    assert charts["responseLabels"][0] == "≤ 10 ms" and charts["stretchLabels"][-1] == "> 1000"

    for shot in (out["screenshot"], out["finalScreenshot"]):
        data = Path(shot).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 20_000
    shutil.copy(out["screenshot"], tmp_path / "console.png")

    # The invoker's admin API serves the same snapshot.
    assert status == 200 and node["policy"] == "fc" and node["queuedTotal"] == 0
    by_name = {f["function"]: f for f in node["functions"]}
    for name in ("guest/slow", "guest/quick"):
        f = by_name[name]
        assert f["calls"] == calls and sum(f["response"]) == calls and sum(f["stretch"]) == calls
        assert f["meanStretch"] >= 1 and f["cpuShare"] > 0.5
    assert by_name["guest/slow"]["expectedS"] > by_name["guest/quick"]["expectedS"]
