"""A kTask run as one call to a device's worker: what the pool does before it and after it.

The pool's side, without torch, as for a model load (``gpu.device_workers``): ``prepare``
looks the inputs up in the data layer and pins them there, admits the constants on the
device's cache (pinning them; the cache evicts victims) and stages one file per output. Its
JSON ``header`` is all the worker needs (``gpu.kaas.executor.KaasWorker.handle``), including
the constants the device should hold (``keep``): the worker drops any other, so it follows
the cache even when a call was prepared and then abandoned. Calls for one device must reach
its worker in the order they were prepared.
``finish`` makes the files the worker wrote the outputs' next versions and releases every pin,
whatever the reply; a constant the worker reports it does not hold is forgotten by the cache.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu.kaas.constants import ConstantCache, cache_key
from gpu.kaas.format import Buffer, Kind, KTask, to_doc
from gpu.kaas.spec import KTaskError
from gpu.kaas.store import DataStore, StoredObject


@dataclass
class RunResult:
    outputs: dict[str, StoredObject]  # output buffer name -> what was written (key, version)
    constant_hits: int = 0
    constant_misses: int = 0
    seconds: float = 0.0  # the worker's time: loads, kernels, writing the outputs
    evicted: list[str] = field(default_factory=list)  # constants dropped from this device

    def reply(self) -> dict[str, dict[str, object]]:
        """The answer a client gets: each output's key and version."""
        return {n: {"key": o.key, "version": o.version} for n, o in self.outputs.items()}


class WorkerError(RuntimeError):
    """The worker failed for a reason that is not the request's (a bug, not a KTaskError)."""


@dataclass
class KTaskCall:
    task: KTask
    device: int
    header: dict[str, Any]
    inputs: list[str] = field(default_factory=list)  # data-layer keys pinned
    constants: list[tuple[str, int]] = field(default_factory=list)  # cache entries pinned
    missed: set[str] = field(default_factory=set)  # cache keys the worker must load
    staged: dict[str, Path] = field(default_factory=dict)  # output buffer -> file to write
    hits: int = 0
    evicted: list[str] = field(default_factory=list)


def lookup(b: Buffer, store: DataStore) -> StoredObject:
    """The data-layer object an input reads, checked against its declaration."""
    assert b.key is not None
    o = store.get(b.key)
    if o is None:
        raise KTaskError(f"input {b.name!r} reads key {b.key!r}, which is not in the data layer")
    if o.spec != b.spec:
        raise KTaskError(f"input {b.name!r} is declared {b.spec} but key {b.key!r} holds {o.spec}")
    if b.version is not None and o.version != b.version:
        raise KTaskError(
            f"input {b.name!r} expects version {b.version} of key {b.key!r}, "
            f"the data layer holds version {o.version}"
        )
    return o


def prepare(task: KTask, device: int, store: DataStore, constants: ConstantCache) -> KTaskCall:
    found = {b.name: lookup(b, store) for b in task.of_kind(Kind.INPUT)}
    call = KTaskCall(task, device, {})
    victims: list[str] = []
    inputs: dict[str, dict[str, Any]] = {}
    try:
        for b in task.of_kind(Kind.INPUT):
            o = found[b.name]
            store.pin(o.key)
            call.inputs.append(o.key)
            ck = None
            if b.const:
                adm = constants.admit(device, o.key, o.version, o.nbytes)
                call.constants.append((o.key, o.version))
                ck = cache_key(o.key, o.version)
                victims += adm.victims
                if adm.hit:
                    call.hits += 1
                else:
                    call.missed.add(ck)
            inputs[b.name] = {"file": str(o.path), "cache_key": ck}
        for b in task.of_kind(Kind.OUTPUT):
            assert b.key is not None
            call.staged[b.name] = store.staging_path(b.key)
    except BaseException:
        abandon(call, store, constants)
        raise
    call.evicted = [v.rpartition("@")[0] for v in victims]
    call.header = {
        "op": "ktask",
        "task": to_doc(task),
        "inputs": inputs,
        "keep": constants.resident(device),
        "outputs": {n: str(p) for n, p in call.staged.items()},
    }
    return call


def finish(
    call: KTaskCall, reply: dict[str, Any], store: DataStore, constants: ConstantCache
) -> RunResult:
    """The worker's reply to ``call``: the result, or the request's error raised."""
    adopted: set[str] = set()
    try:
        resident = set(reply.get("resident", ()))
        for key, version in call.constants:
            ck = cache_key(key, version)
            if ck not in resident:  # its load failed, or the worker lost it
                constants.forget(call.device, key, version)
        call.constants = [c for c in call.constants if cache_key(*c) in resident]
        if "error" in reply:
            message = str(reply.get("message", ""))
            if reply["error"] == "KTaskError":
                raise KTaskError(message)
            raise WorkerError(f"{reply['error']}: {message}")
        outputs: dict[str, StoredObject] = {}
        for name, path in call.staged.items():
            b = call.task.buffers[name]
            assert b.key is not None
            outputs[name] = store.adopt(b.key, b.spec, path)
            adopted.add(name)
        return RunResult(
            outputs,
            call.hits,
            len(call.missed),
            float(reply.get("seconds", 0.0)),
            call.evicted,
        )
    finally:
        for name, path in call.staged.items():
            if name not in adopted:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        release(call, store, constants)


def abandon(call: KTaskCall, store: DataStore, constants: ConstantCache) -> None:
    """A prepared call that will never reach the worker: the constants it admitted but the
    worker never loaded leave the cache (their victims stay evicted), then pins go."""
    for key, version in call.constants:
        if cache_key(key, version) in call.missed:
            constants.forget(call.device, key, version)
    call.constants = [c for c in call.constants if cache_key(*c) not in call.missed]
    release(call, store, constants)


def release(call: KTaskCall, store: DataStore, constants: ConstantCache) -> None:
    for key, version in call.constants:
        constants.release(call.device, key, version)
    for key in call.inputs:
        store.unpin(key)
    call.constants, call.inputs = [], []
