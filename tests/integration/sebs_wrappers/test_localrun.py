"""SeBS function code run locally through the OpenWhisk wrapper's ``main(args)`` against the
local object store: proves the packages without any platform.
"""

from __future__ import annotations

import pytest
from sebs_helpers import needs_modules, needs_sebs

from sebs_wrappers import catalog, deploy, inputs, localrun, packaging

pytestmark = needs_sebs

WRAPPER_KEYS = {"begin", "end", "results_time", "is_cold", "result", "request_id"}


def run_benchmark(services, bench_id: str, size: str | None = None, calls: int = 2, **opts):
    bench = catalog.BENCHMARKS[bench_id]
    root = services.root
    pkg = packaging.build(bench, root / "zips")
    prep = inputs.prepare(bench, services, root / "data", size, **opts)
    args = {**prep.params, **services.storage.action_params()}
    results = localrun.run_zip(pkg.path, [dict(args) for _ in range(calls)])
    assert len(results) == calls
    for r in results:
        assert set(r) >= WRAPPER_KEYS, r
        ok, detail = deploy.check_reply(bench.action_name, 200, r)
        assert ok, detail
    assert [r["is_cold"] for r in results] == [True] + [False] * (calls - 1)
    return prep, results


def assert_output_stored(services, prep, result) -> None:
    key = result["result"]["result"]["key"]
    assert key.startswith(prep.output_prefixes[0] + "/")
    stat = services.storage.client().stat_object(services.storage.bucket, key)
    assert stat.size > 0


def test_010_sleep(services) -> None:
    bench = catalog.BENCHMARKS["010.sleep"]
    pkg = packaging.build(bench, services.root / "zips")
    args = {"sleep": 0.05, **services.storage.action_params()}
    results = localrun.run_zip(pkg.path, [dict(args), dict(args)])
    assert [r["result"]["result"] for r in results] == [0.05, 0.05]
    assert results[0]["is_cold"] and not results[1]["is_cold"]
    assert results[1]["results_time"] >= 50_000  # microseconds


@needs_modules("jinja2")
def test_110_dynamic_html(services) -> None:
    _, results = run_benchmark(services, "110.dynamic-html", "test")
    html = results[-1]["result"]["result"]
    assert html.startswith("<!DOCTYPE html>") and "testname" in html


@needs_modules("minio")
def test_120_uploader(services) -> None:
    prep, results = run_benchmark(services, "120.uploader")
    assert prep.params["object"]["url"].startswith(services.files_url)
    assert_output_stored(services, prep, results[-1])


@needs_modules("PIL", "minio")
def test_210_thumbnailer(services) -> None:
    from PIL import Image

    prep, results = run_benchmark(services, "210.thumbnailer")
    assert_output_stored(services, prep, results[-1])
    key = results[-1]["result"]["result"]["key"]
    data = services.storage.client().get_object(services.storage.bucket, key).read()
    import io

    with Image.open(io.BytesIO(data)) as img:
        assert max(img.size) <= 200


@needs_modules("minio")
def test_311_compression(services) -> None:
    prep, results = run_benchmark(services, "311.compression", tree_bytes=200_000)
    assert_output_stored(services, prep, results[-1])


@needs_modules("igraph")
@pytest.mark.parametrize("bench_id", ["501.graph-pagerank", "502.graph-mst", "503.graph-bfs"])
def test_graphs(services, bench_id: str) -> None:
    run_benchmark(services, bench_id, "test")


@pytest.mark.slow
@needs_modules("imageio_ffmpeg", "minio")
def test_220_video_processing(services) -> None:
    prep, results = run_benchmark(services, "220.video-processing", video_seconds=2)
    assert_output_stored(services, prep, results[-1])


@pytest.mark.slow
@needs_modules("torch", "PIL", "minio")
def test_411_image_recognition(services) -> None:
    _, results = run_benchmark(services, "411.image-recognition")
    inner = results[-1]["result"]["result"]
    assert 0 <= inner["idx"] < 1000 and isinstance(inner["class"], str)


@pytest.mark.slow
@needs_modules("squiggle", "minio")
def test_504_dna_visualisation(services) -> None:
    prep, results = run_benchmark(services, "504.dna-visualisation", fasta_bases=20_000)
    assert_output_stored(services, prep, results[-1])
