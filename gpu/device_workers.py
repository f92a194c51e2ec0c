"""Pool side of the device workers: process lifecycle, framed calls, crash detection.

``WorkerProcess`` owns one ``python -m gpu.device_process`` subprocess; calls are serialised
(a device runs one request at a time). ``DeviceWorkers`` is the live ``Backend`` of the
dispatcher: it turns a scheduler ``Dispatch`` into one ``run`` call, and replaces a worker that
died (or, for the Exclusive policy's cold starts, one that must make way for another function).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpu.devices import DeviceSpec
from gpu.dispatcher import JobResult, ModelNotLoaded, WorkerCrashed
from gpu.hosttier import HostTier
from gpu.protocol import read_frame, write_frame
from gpu.scheduler import Dispatch
from whisk.clock import Clock, SystemClock

log = logging.getLogger(__name__)

_ROOT = str(Path(__file__).resolve().parent.parent)


class InferenceError(RuntimeError):
    """The model raised (bad input, shape mismatch, ...); the device is fine."""


class ModelLoadError(ModelNotLoaded):
    """The worker could not load the model onto the device."""


class UnknownModel(KeyError):
    """The host tier no longer holds the model: the client must send its bytes again."""


class WorkerProcess:
    def __init__(
        self,
        name: str,
        args: Sequence[str],
        *,
        max_payload: int,
        start_timeout: float = 180.0,
    ) -> None:
        self.name = name
        self.args = list(args)
        self.max_payload = max_payload
        self.start_timeout = start_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.info: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> dict[str, Any]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gpu.device_process",
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            cwd=_ROOT,
            start_new_session=True,  # a Ctrl-C to the invoker does not kill workers mid-call
        )
        try:
            assert self.proc.stdout is not None
            async with asyncio.timeout(self.start_timeout):
                self.info, _ = await read_frame(self.proc.stdout, self.max_payload)
        except (asyncio.IncompleteReadError, TimeoutError) as e:
            await self.kill()
            raise WorkerCrashed(f"{self.name}: worker failed to start ({e!r})") from e
        log.info("GPU worker %s started (pid %s)", self.name, self.pid)
        return self.info

    async def call(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict, bytes]:
        async with self._lock:
            proc = self.proc
            if proc is None or proc.returncode is not None:
                raise WorkerCrashed(f"{self.name}: worker is not running")
            assert proc.stdin is not None and proc.stdout is not None
            try:
                await write_frame(proc.stdin, header, payload)
                return await read_frame(proc.stdout, self.max_payload)
            except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError) as e:
                with contextlib.suppress(ProcessLookupError):
                    await asyncio.wait_for(proc.wait(), 5)
                raise WorkerCrashed(
                    f"{self.name}: worker pid {proc.pid} died (exit {proc.returncode})"
                ) from e

    async def replace(self, clock: Clock) -> float:
        """Kill the process and start a fresh one once the call in flight (another kind of
        work on the same device, a kTask) has its answer; returns the seconds it took."""
        async with self._lock:
            await self.kill()
            t0 = clock.now()
            await self.start()
            return clock.now() - t0

    async def stop(self, grace_s: float = 5.0) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            async with asyncio.timeout(grace_s):
                await self.call({"op": "exit"})
                await proc.wait()
        except (TimeoutError, WorkerCrashed):
            await self.kill()

    async def kill(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        await proc.wait()


class DeviceWorkers:
    """The live backend: one worker process per device, models loaded from the host tier."""

    def __init__(
        self,
        devices: Sequence[DeviceSpec],
        host: HostTier,
        *,
        threads: int = 1,
        max_payload: int,
        clock: Clock | None = None,
        on_restart: Callable[[int, str], None] | None = None,
    ) -> None:
        self.devices = list(devices)
        self.host = host
        self.clock = clock or SystemClock()
        self.on_restart = on_restart
        self.workers = [
            WorkerProcess(
                f"gpu{d.index}",
                ["--device", d.torch_device, "--threads", str(threads)],
                max_payload=max_payload,
            )
            for d in devices
        ]
        self.restarts = [0] * len(devices)

    async def start(self) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(w.start() for w in self.workers)))

    async def stop(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)

    async def restart(self, device: int, reason: str) -> float:
        """Replace a device's worker; returns how long the new one took to become ready."""
        took = await self.workers[device].replace(self.clock)
        self.restarts[device] += 1
        if self.on_restart is not None:
            self.on_restart(device, reason)
        return took

    async def execute(self, dispatch: Dispatch) -> JobResult:
        d = dispatch.device
        req = dispatch.request
        w = self.workers[d]
        cold_s = 0.0
        if dispatch.cold_start:
            cold_s = await self.restart(d, "exclusive switch")
        elif not w.alive:
            await self.restart(d, "found dead")
            raise WorkerCrashed(f"gpu{d}: worker had died; its models are gone")
        load = None
        if not dispatch.hit:
            try:
                load = self.host.load_spec(req.model, cold=dispatch.cold_start)
            except KeyError:
                raise UnknownModel(req.model) from None
        header = {
            "op": "run",
            "model": req.model,
            "victims": [] if dispatch.cold_start else list(dispatch.victims),
            "load": load,
        }
        try:
            h, out = await w.call(header, req.payload or b"")
        except WorkerCrashed:
            log.warning("GPU worker gpu%d died during a request; restarting it", d)
            await self.restart(d, "crashed")
            raise
        if "error" in h:
            if h.get("stage") == "load":
                raise ModelLoadError(f"{h['error']}: {h.get('message', '')}")
            raise InferenceError(f"{h['error']}: {h.get('message', '')}")
        return JobResult(out, cold_s + float(h["upload_s"]), float(h["infer_s"]))

    async def ktask(self, device: int, header: dict[str, Any]) -> dict[str, Any]:
        """Send one kTask call to the device's worker (in turn with its model work); a dead
        worker is replaced, and the call fails with WorkerCrashed (its kTask's error)."""
        w = self.workers[device]
        if not w.alive:
            await self.restart(device, "found dead")
            raise WorkerCrashed(f"gpu{device}: worker had died; its constants are gone")
        try:
            h, _ = await w.call(header)
        except WorkerCrashed:
            log.warning("GPU worker gpu%d died during a kTask; restarting it", device)
            await self.restart(device, "crashed")
            raise
        return h

    async def forget(self, key: str) -> None:
        """The host tier dropped a model: GPU workers release their pinned views of it."""
        await asyncio.gather(
            *(w.call({"op": "forget", "model": key}) for w in self.workers if w.alive),
            return_exceptions=True,
        )
