"""Upload a benchmark's inputs and build its invocation parameters with SeBS's own ``input.py``.

``generate_input`` from the published benchmark decides the object keys and the event shape; we
supply the (generated) data directory, the bucket prefixes and an upload function, as SeBS's
deployment code does. Only 120.uploader's public URL is pointed at the loopback file server.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sebs_wrappers import datagen
from sebs_wrappers.catalog import Benchmark
from sebs_wrappers.objstore import Services


@dataclass(frozen=True)
class PreparedInput:
    params: dict[str, Any]
    input_prefixes: tuple[str, ...]
    output_prefixes: tuple[str, ...]


def load_input_module(bench: Benchmark) -> ModuleType:
    """Load ``<benchmark>/input.py`` as a standalone module (it imports nothing from sebs)."""
    path = bench.path / "input.py"
    spec = importlib.util.spec_from_file_location(f"_sebs_input_{bench.number}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prefixes(bench: Benchmark) -> tuple[list[str], list[str]]:
    """Input and output prefixes in the benchmarks bucket, one per SeBS 'bucket'."""
    module = load_input_module(bench)
    n_in, n_out = module.buckets_count() if hasattr(module, "buckets_count") else (0, 0)
    return (
        [f"{bench.number}-{i}-input" for i in range(n_in)],
        [f"{bench.number}-{i}-output" for i in range(n_out)],
    )


def prepare(
    bench: Benchmark,
    services: Services | None,
    data_root: Path,
    size: str | None = None,
    **data_opts: int,
) -> PreparedInput:
    """Generate and upload ``bench``'s data; return the event SeBS would invoke it with."""
    size = size or bench.size
    module = load_input_module(bench)
    inputs, outputs = prefixes(bench)
    data_dir = datagen.generate(bench.id, data_root / bench.id, size, **data_opts)

    storage = services.storage if services and bench.needs_storage else None
    client = storage.client() if storage else None

    def upload(idx: int, key: str, filepath: str) -> None:
        if client is None or storage is None:
            raise RuntimeError(f"{bench.id} needs the object store")
        client.fput_object(storage.bucket, f"{inputs[idx]}/{key}", filepath)

    params = module.generate_input(
        str(data_dir),
        size,
        services.storage.bucket if services else "",
        inputs,
        outputs,
        upload,
        None,
    )
    if bench.id == "120.uploader":
        if services is None:
            raise RuntimeError("120.uploader needs the loopback file server")
        files_dir = data_root / "files"
        name = datagen.uploader_file(files_dir, size)
        assert os.path.basename(params["object"]["url"]) == name
        params["object"]["url"] = f"{services.files_url}/{name}"
    return PreparedInput(params, tuple(inputs), tuple(outputs))
