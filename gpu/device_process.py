"""A device worker process: holds resident models for one device and runs one request at a time.

Started by the pool as ``python -m gpu.device_process --device cpu|cuda:N``; speaks length-prefixed
frames (gpu.protocol) on stdin/stdout, and sends anything the models print to stderr. The
``loader`` role has no device: it turns a model file into the host tier's form (a ``meta``
skeleton plus one flat file of tensors), so untrusted pickles are never opened by the invoker.

A miss on a ``module`` model is a copy, not a deserialisation: the skeleton is built on the
``meta`` device, the host tier's tensors are mapped (``mmap``, pinned with cudaHostRegister on
a GPU) and copied to the device, then assigned into the skeleton.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import json
import mmap
import os
import sys
import time
import traceback
import zipfile
from typing import Any

ALIGN = 64


def _now() -> float:
    return time.perf_counter()


def _is_torchscript(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return any(n.endswith("constants.pkl") or "/code/" in n for n in z.namelist())
    except zipfile.BadZipFile:
        return False


class Worker:
    def __init__(self, device: str, threads: int) -> None:
        import torch

        self.torch = torch
        torch.set_num_threads(threads)
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.resident: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}
        self.host_maps: dict[str, tuple[mmap.mmap, Any]] = {}  # GPU: pinned host tier views
        self.kaas: Any = None  # gpu.kaas.executor.KaasWorker, made at the first kTask

    def ktask(self, h: dict[str, Any]) -> dict[str, Any]:
        """Run one kTask call (``gpu.kaas.calls.prepare``'s header); never raises."""
        if self.kaas is None:
            from gpu.kaas.executor import KaasWorker

            self.kaas = KaasWorker(self.device)
        reply: dict[str, Any] = self.kaas.handle(h)
        return reply

    # -- start-up ----------------------------------------------------------------------------

    def calibrate(self) -> dict[str, float]:
        """Measure host→device copy bandwidth and weight-streaming rate: the profile priors."""
        torch = self.torch
        n = 16 << 20
        src = torch.empty(n, dtype=torch.uint8)
        if self.cuda:
            src = src.pin_memory()
        src.fill_(1)
        copies = []
        for _ in range(3):
            t0 = _now()
            dst = src.to(self.device, copy=True)
            self._sync()
            copies.append(_now() - t0)
            del dst
        width = 2048  # 16 MiB of weights: larger than CPU caches, like real models
        lin = torch.nn.Linear(width, width).to(self.device)
        x = torch.randn(1, width, device=self.device)
        runs = []
        with torch.inference_mode():
            lin(x)
            for _ in range(3):
                t0 = _now()
                lin(x)
                self._sync()
                runs.append(_now() - t0)
        weight_bytes = width * width * 4
        return {"copy_bw": n / min(copies), "compute_bw": weight_bytes / min(runs)}

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    # -- loader role ---------------------------------------------------------------------------

    def ingest(self, h: dict[str, Any]) -> dict[str, Any]:
        torch = self.torch
        with open(h["path"], "rb") as f:
            data = f.read()
        if _is_torchscript(data):
            m = torch.jit.load(io.BytesIO(data), map_location="cpu")
            size = _tensor_bytes(m)
            return {"kind": "jit", "size": size}
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
        if not isinstance(obj, torch.nn.Module):
            return {"error": "NotAModule", "message": f"the file holds a {type(obj).__name__}"}
        manifest, size = _flatten(torch, obj, h["bin"])
        obj.to("meta")
        buf = io.BytesIO()
        torch.save(obj, buf)
        with open(h["skel"], "wb") as f:
            f.write(buf.getvalue())
        with open(h["manifest"], "w") as f:
            json.dump(manifest, f)
        return {"kind": "module", "size": size}

    # -- device role ---------------------------------------------------------------------------

    def load(self, spec: dict[str, Any]) -> Any:
        torch = self.torch
        kind = spec["kind"]
        if kind == "jit":
            return torch.jit.load(spec["file"], map_location=self.device).eval()
        if kind == "file":  # a cold start: full deserialisation of the original file
            with open(spec["file"], "rb") as f:
                data = f.read()
            if _is_torchscript(data):
                return torch.jit.load(io.BytesIO(data), map_location=self.device).eval()
            m = torch.load(io.BytesIO(data), map_location=self.device, weights_only=False)
            return m.eval()
        with open(spec["skel"], "rb") as f:
            skel = torch.load(f, weights_only=False)
        with open(spec["manifest"]) as f:
            manifest = json.load(f)
        if not manifest:
            return skel.eval()
        mm = self._map(spec)
        # One copy of the whole flat file, then views: a model of a thousand small tensors
        # costs one transfer at full bandwidth, not a thousand synchronous ones.
        flat = torch.frombuffer(mm, dtype=torch.uint8).to(self.device, copy=True)
        if not self.cuda:
            mm.close()
        made: dict[int, Any] = {}
        for entry in manifest:
            off = entry["offset"]
            if off not in made:
                dtype = getattr(torch, entry["dtype"])
                end = off + entry["numel"] * dtype.itemsize
                made[off] = flat[off:end].view(dtype).view(entry["shape"])
            _assign(torch, skel, entry["name"], entry["param"], made[off])
        return skel.eval()

    def _map(self, spec: dict[str, Any]) -> mmap.mmap:
        if self.cuda and spec["key"] in self.host_maps:
            return self.host_maps[spec["key"]][0]
        # Shared and writable (never written): registering a private copy-on-write mapping
        # would copy every page of the tier file first.
        with open(spec["bin"], "r+b") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE)
        if self.cuda:
            pinned = None
            try:  # page-locked host tier: copies at full PCIe speed
                buf = self.torch.frombuffer(mm, dtype=self.torch.uint8)
                rt = self.torch.cuda.cudart()
                if rt.cudaHostRegister(buf.data_ptr(), buf.numel(), 0) == 0:
                    pinned = buf
            except Exception:
                pinned = None
            self.host_maps[spec["key"]] = (mm, pinned)
        return mm

    def forget(self, key: str) -> None:
        entry = self.host_maps.pop(key, None)
        if entry is not None and entry[1] is not None:
            try:
                self.torch.cuda.cudart().cudaHostUnregister(entry[1].data_ptr())
            except Exception:
                pass

    def run(self, h: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        torch = self.torch
        for v in h.get("victims", ()):
            self.resident.pop(v, None)
            self.sizes.pop(v, None)
        if h.get("victims") and self.cuda:
            torch.cuda.empty_cache()
        key = h["model"]
        upload_s = 0.0
        if h.get("load"):
            t0 = _now()
            try:
                self.resident[key] = self.load(h["load"])
            except Exception as e:
                return _error(e, stage="load"), b""
            self._sync()
            upload_s = _now() - t0
            self.sizes[key] = _tensor_bytes(self.resident[key])
        model = self.resident.get(key)
        if model is None:
            return {"error": "NotResident", "message": f"model {key[:12]} is not loaded"}, b""
        try:
            call = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
            args = _to(torch, call.get("args", ()), self.device)
            kwargs = _to(torch, call.get("kwargs", {}), self.device)
            t0 = _now()
            with torch.inference_mode():
                y = model(*args, **kwargs)
            self._sync()
            infer_s = _now() - t0
            out = io.BytesIO()
            torch.save(_to(torch, y, "cpu"), out)
        except Exception as e:
            return _error(e, stage="infer"), b""
        return {
            "ok": True,
            "upload_s": upload_s,
            "infer_s": infer_s,
            "resident_bytes": sum(self.sizes.values()),
        }, out.getvalue()


def _tensor_bytes(m: Any) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in [*m.parameters(), *m.buffers()]:
        k = (t.data_ptr(), t.numel())
        if k not in seen:
            seen.add(k)
            total += t.numel() * t.element_size()
    return total


def _flatten(torch: Any, m: Any, path: str) -> tuple[list[dict[str, Any]], int]:
    """Write every distinct tensor of ``m`` into one flat file; tied weights share an offset."""
    entries: list[dict[str, Any]] = []
    offsets: dict[tuple[int, int, tuple[int, ...]], int] = {}
    pos = 0
    with open(path, "wb") as f:
        named = [(n, t, True) for n, t in m.named_parameters(remove_duplicate=False)]
        named += [(n, t, False) for n, t in m.named_buffers(remove_duplicate=False)]
        for name, t, is_param in named:
            if t is None:
                continue
            k = (t.data_ptr(), t.numel(), tuple(t.shape))
            if k not in offsets:
                pad = (-pos) % ALIGN
                f.write(b"\0" * pad)
                pos += pad
                x = t.detach().contiguous()
                n = x.numel() * x.element_size()
                if n:
                    f.write(memoryview((ctypes.c_char * n).from_address(x.data_ptr())))
                offsets[k] = pos
                pos += n
            entries.append(
                {
                    "name": name,
                    "param": is_param,
                    "offset": offsets[k],
                    "dtype": str(t.dtype).removeprefix("torch."),
                    "shape": list(t.shape),
                    "numel": t.numel(),
                    "requires_grad": bool(t.requires_grad),
                }
            )
    size = sum({e["offset"]: e["numel"] * _itemsize(torch, e) for e in entries}.values())
    return entries, size


def _itemsize(torch: Any, e: dict[str, Any]) -> int:
    return getattr(torch, e["dtype"]).itemsize


def _assign(torch: Any, root: Any, name: str, is_param: bool, t: Any) -> None:
    prefix, _, leaf = name.rpartition(".")
    mod = root.get_submodule(prefix) if prefix else root
    if is_param:
        mod._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    else:
        mod._buffers[leaf] = t


def _to(torch: Any, obj: Any, device: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(torch, o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(torch, v, device) for k, v in obj.items()}
    return obj


def _error(e: BaseException, stage: str) -> dict[str, Any]:
    return {
        "error": type(e).__name__,
        "message": str(e)[:2000],
        "stage": stage,
        "trace": traceback.format_exc(limit=5)[-4000:],
    }


def main(argv: list[str] | None = None) -> int:
    from gpu.protocol import read_frame_sync, write_frame_sync

    ap = argparse.ArgumentParser(description="GPU pool device worker")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--role", choices=["device", "loader"], default="device")
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever models print must not corrupt the frames
    inp = sys.stdin.buffer
    worker = Worker("cpu" if args.role == "loader" else args.device, args.threads)
    ready: dict[str, Any] = {"ready": True, "pid": os.getpid(), "torch": worker.torch.__version__}
    if args.role == "device":
        ready.update(worker.calibrate())
    write_frame_sync(out, ready)
    while True:
        try:
            h, payload = read_frame_sync(inp)
        except EOFError:
            return 0
        op = h.get("op")
        reply: dict[str, Any]
        body = b""
        try:
            if op == "run":
                reply, body = worker.run(h, payload)
            elif op == "ktask":
                reply = worker.ktask(h)
            elif op == "ingest":
                reply = worker.ingest(h)
            elif op == "forget":
                worker.forget(h["model"])
                reply = {"ok": True}
            elif op == "stats":
                reply = {"resident": dict(worker.sizes), "pid": os.getpid()}
            elif op == "exit":
                write_frame_sync(out, {"ok": True})
                return 0
            else:
                reply = {"error": "BadOp", "message": f"unknown op {op!r}"}
        except Exception as e:
            reply = _error(e, stage=str(op))
        write_frame_sync(out, reply, body)


if __name__ == "__main__":
    sys.exit(main())
