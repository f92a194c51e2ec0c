"""The open-loop replayer: sends keep their schedule however slow the replies are."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from aiohttp import web

from gatling import replay as replay_cmd
from gatling.replay import ReplayResult, replay
from gatling.scenario import Call, Timing, read_scenario, read_timings, write_scenario
from whisk.client import OpenWhisk


class SlowServer:
    """Answers every invoke after ``delay`` seconds; records when each request arrived."""

    def __init__(self, delay: float, status: int = 200, accepted_for: set[str] = frozenset()):
        self.delay = delay
        self.status = status
        self.accepted_for = accepted_for
        self.arrivals: dict[int, float] = {}
        self.records: dict[str, dict] = {}
        self.runner: web.AppRunner | None = None

    async def invoke(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.arrivals[body["n"]] = time.monotonic()
        aid = uuid.uuid4().hex
        if request.match_info["name"] in self.accepted_for:
            start = time.time()
            self.records[aid] = {
                "activationId": aid,
                "start": int(start * 1e3),
                "end": int((start + 0.3) * 1e3),
                "response": {"success": True, "result": {}},
            }
            return web.json_response({"activationId": aid}, status=202)
        await asyncio.sleep(self.delay)
        if self.status != 200:
            return web.json_response({"error": "boom"}, status=self.status)
        return web.json_response(
            {"activationId": aid, "response": {"success": True, "result": {"n": body["n"]}}}
        )

    async def activation(self, request: web.Request) -> web.Response:
        rec = self.records.get(request.match_info["aid"])
        return web.json_response(rec) if rec else web.json_response({}, status=404)

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/_/actions/{name}", self.invoke)
        app.router.add_get("/api/v1/namespaces/_/activations/{aid}", self.activation)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def calls(n: int, gap: float, action: str = "slow") -> list[Call]:
    return [Call(i, i * gap, action, {"n": i}) for i in range(n)]


async def test_slow_replies_never_delay_sends() -> None:
    # 30 calls 40 ms apart, each answered after 1.5 s: closed-loop would take 45 s
    server = SlowServer(delay=1.5)
    async with server as url, OpenWhisk(url, timeout_s=30) as ow:
        t0 = time.monotonic()
        res = await replay(calls(30, 0.04), ow)
        elapsed = time.monotonic() - t0
    assert elapsed < 1.2 + 1.5 + 1.0
    assert [t.status for t in res.timings] == [200] * 30
    for t in res.timings:
        assert t.lateness_s < 0.1, t
        assert t.response_s >= 1.5
        assert t.activation_id and t.seq in res.records
    # the server saw the requests on schedule, too
    first = server.arrivals[0]
    for i, arrived in server.arrivals.items():
        assert abs((arrived - first) - i * 0.04) < 0.1
    late = res.lateness()
    assert late["p50_ms"] <= late["p99_ms"] <= late["max_ms"] < 100


async def test_errors_and_accepted_replies_are_recorded() -> None:
    server = SlowServer(delay=0.01, status=503, accepted_for={"long"})
    async with server as url, OpenWhisk(url, timeout_s=10) as ow:
        res = await replay([Call(0, 0.0, "x", {"n": 0}), Call(1, 0.01, "long", {"n": 1})], ow)
    failed, accepted = res.timings
    assert failed.status == 503 and failed.error == "http 503"
    assert accepted.status == 202 and "record" in accepted.error
    # done comes from the record's end (start + 300 ms), not from when polling noticed it
    assert 0.2 < accepted.done_s - accepted.sent_s < 0.6
    assert res.statuses() == {503: 1, 202: 1}


async def test_connection_errors_do_not_stop_the_replay() -> None:
    async with OpenWhisk("http://127.0.0.1:9", timeout_s=2) as ow:
        res = await replay(calls(3, 0.01), ow)
    assert [t.status for t in res.timings] == [0, 0, 0]
    assert all(t.error for t in res.timings)


def test_scenario_and_timings_round_trip(tmp_path: Path) -> None:
    original = [Call(1, 0.5, "b", {"x": [1, 2]}), Call(0, 0.25, "a", {})]
    write_scenario(tmp_path / "s.jsonl", original)
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"seq": 0, "t": 0.25, "action": "a", "params": {}}
    (tmp_path / "s.jsonl").write_text("# comment\n\n" + "\n".join(lines) + "\n")
    assert read_scenario(tmp_path / "s.jsonl") == sorted(original, key=lambda c: c.t)
    (tmp_path / "bad.jsonl").write_text('{"t": 1}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        read_scenario(tmp_path / "bad.jsonl")

    timings = [Timing(0, "a", 0.25, 0.26, 1.5, 200, "abc", "", 1700000000.0)]
    from gatling.scenario import write_timings

    write_timings(tmp_path / "t.csv", timings)
    back = read_timings(tmp_path / "t.csv")
    assert back[0].activation_id == "abc" and back[0].response_s == pytest.approx(1.24)


def test_lateness_summary_text() -> None:
    res = ReplayResult([Timing(i, "a", 0.0, i / 1000, 1.0, 200) for i in range(100)])
    text = res.summary()
    assert "replayed 100 requests (200: 100)" in text
    assert res.lateness()["p50_ms"] == pytest.approx(49.5)  # whisk.summary.percentile
    assert res.lateness()["max_ms"] == pytest.approx(99.0)


def test_cli_main_writes_timings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenario(tmp_path / "s.jsonl", calls(5, 0.01))
    server = SlowServer(delay=0.05)

    async def serve_and_replay() -> None:
        async with server as url:
            import argparse

            parser = argparse.ArgumentParser()
            replay_cmd.add_arguments(parser)
            args = parser.parse_args(
                [str(tmp_path / "s.jsonl"), "--apihost", url, "--out", str(tmp_path / "t.csv")]
            )
            # run the CLI's own event loop in a thread: it calls asyncio.run
            assert await asyncio.to_thread(replay_cmd.main, args) == 0

    asyncio.run(serve_and_replay())
    assert len(read_timings(tmp_path / "t.csv")) == 5
    assert "send lateness" in capsys.readouterr().out
