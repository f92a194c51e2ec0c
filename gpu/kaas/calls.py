"""A kTask run as one call to a device's worker: what the pool does before it and after it.

The pool's side, without torch, as for a model load (``gpu.device_workers``), in two steps so
that a call waiting for its device holds no constant memory: ``stage`` (when the kTask is
placed) looks the inputs up in the data layer, pins them there and stages one file per
output; ``admit_constants`` (when the device's turn comes, just before the call is sent)
admits the constants on the device's cache (pinning them; the cache evicts victims) and
writes the JSON ``header``, all the worker needs (``gpu.kaas.executor.KaasWorker.handle``),
including the constants the device should hold (``keep``): the worker drops any other, so it
follows the cache even when a call was admitted and then abandoned. ``prepare`` is both at
once. Calls for one device must reach its worker in the order their constants were admitted.
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
    found: dict[str, StoredObject] = field(default_factory=dict)  # input buffer -> version read
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
    """``stage`` and ``admit_constants`` at once, for a caller that sends the call right away."""
    call = stage(task, device, store)
    try:
        admit_constants(call, constants)
    except BaseException:
        abandon(call, store, constants)
        raise
    return call


def stage(task: KTask, device: int, store: DataStore) -> KTaskCall:
    """Pin the inputs' current versions (their files stay until ``finish``) and stage the
    outputs; no constant is admitted yet, so a call waiting for its device takes no room."""
    found = {b.name: lookup(b, store) for b in task.of_kind(Kind.INPUT)}
    call = KTaskCall(task, device, {})
    try:
        for name, o in found.items():
            store.pin(o.key)
            call.inputs.append(o.key)
            call.found[name] = o
        for b in task.of_kind(Kind.OUTPUT):
            assert b.key is not None
            call.staged[b.name] = store.staging_path(b.key)
    except BaseException:
        for key in call.inputs:
            store.unpin(key)
        call.inputs = []
        raise
    return call


def admit_constants(call: KTaskCall, constants: ConstantCache) -> None:
    """Admit and pin the staged call's constants on its device (LRU victims evicted) and write
    its header. A constant that does not fit raises ``KTaskError`` and the call then holds no
    constant; its inputs stay pinned until the caller abandons it."""
    assert not call.header, "the call's constants are already admitted"
    victims: list[str] = []
    inputs: dict[str, dict[str, Any]] = {}
    try:
        for b in call.task.of_kind(Kind.INPUT):
            o = call.found[b.name]
            ck = None
            if b.const:
                adm = constants.admit(call.device, o.key, o.version, o.nbytes)
                call.constants.append((o.key, o.version))
                ck = cache_key(o.key, o.version)
                victims += adm.victims
                if adm.hit:
                    call.hits += 1
                else:
                    call.missed.add(ck)
            inputs[b.name] = {"file": str(o.path), "cache_key": ck}
    except BaseException:
        _drop_constants(call, constants)
        call.hits, call.missed = 0, set()
        raise
    call.evicted = [v.rpartition("@")[0] for v in victims]
    call.header = {
        "op": "ktask",
        "task": to_doc(call.task),
        "inputs": inputs,
        "keep": constants.resident(call.device),
        "outputs": {n: str(p) for n, p in call.staged.items()},
    }


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
    """A staged call that will never reach the worker: the constants it admitted but the
    worker never loaded leave the cache (their victims stay evicted), then pins go."""
    _drop_constants(call, constants)
    release(call, store, constants)


def _drop_constants(call: KTaskCall, constants: ConstantCache) -> None:
    """Unpin the call's constants, dropping those it admitted that the worker never loaded."""
    for key, version in call.constants:
        if cache_key(key, version) in call.missed:
            constants.forget(call.device, key, version)
        else:
            constants.release(call.device, key, version)
    call.constants = []


def release(call: KTaskCall, store: DataStore, constants: ConstantCache) -> None:
    for key, version in call.constants:
        constants.release(call.device, key, version)
    for key in call.inputs:
        store.unpin(key)
    call.constants, call.inputs = [], []
