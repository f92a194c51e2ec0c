"""SeBS packaging: zip layout, limits from config.json, /tmp rewriting, reproducibility."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from sebs_helpers import needs_sebs

from sebs_wrappers import catalog, packaging

pytestmark = needs_sebs

REQUIRED = (
    "010.sleep",
    "110.dynamic-html",
    "120.uploader",
    "210.thumbnailer",
    "220.video-processing",
    "311.compression",
    "411.image-recognition",
    "501.graph-pagerank",
    "502.graph-mst",
    "503.graph-bfs",
    "504.dna-visualisation",
)


@pytest.fixture(scope="module")
def zips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, packaging.Package]:
    out = tmp_path_factory.mktemp("zips")
    return {b.id: packaging.build(b, out) for b in catalog.resolve(list(REQUIRED))}


def test_catalog_covers_the_required_benchmarks() -> None:
    assert set(REQUIRED) <= set(catalog.BENCHMARKS)
    assert catalog.sebs_root().name == "sebs"


@pytest.mark.parametrize("bench_id", REQUIRED)
def test_zip_layout(zips: dict[str, packaging.Package], bench_id: str) -> None:
    pkg = zips[bench_id]
    bench = pkg.benchmark
    with zipfile.ZipFile(pkg.path) as zf:
        names = set(zf.namelist())
        assert {"__main__.py", "function/__init__.py", "function/function.py"} <= names
        wrapper = zf.read("__main__.py").decode()
        assert "def main(args)" in wrapper and "from function import function" in wrapper
        assert wrapper == (catalog.wrapper_dir() / "__main__.py").read_text()
        assert ("function/storage.py" in names) == bench.needs_storage
        manifest = json.loads(zf.read("function/PACKAGING.json"))
        assert manifest["benchmark"] == bench_id
        if bench.needs_storage:  # the object store's timeout raised from SeBS's 1 s
            assert "timedelta(seconds=120)" in zf.read("function/storage.py").decode()
            assert manifest["storage_timeout_s"] == 120
        assert "/tmp/" not in zf.read("function/function.py").decode().replace("'/tmp/'", "")


@pytest.mark.parametrize("bench_id", REQUIRED)
def test_limits_come_from_config_json(bench_id: str) -> None:
    bench = catalog.BENCHMARKS[bench_id]
    config = json.loads((bench.path / "config.json").read_text())
    assert bench.config_memory_mb == config["memory"]
    assert bench.memory_mb == max(config["memory"], bench.min_memory_mb)
    assert bench.timeout_ms == config["timeout"] * 1000


def test_resources_and_helpers_are_packaged(zips: dict[str, packaging.Package]) -> None:
    def names(bench_id: str) -> set[str]:
        return set(zipfile.ZipFile(zips[bench_id].path).namelist())

    assert "function/templates/template.html" in names("110.dynamic-html")
    assert "jinja2/__init__.py" in names("110.dynamic-html")  # vendored pure Python
    assert not any(n.endswith(".so") for n in names("110.dynamic-html"))
    assert "function/resources/watermark.png" in names("220.video-processing")
    info = zipfile.ZipFile(zips["220.video-processing"].path).getinfo("function/ffmpeg/ffmpeg")
    assert (info.external_attr >> 16) & 0o111  # executable launcher
    assert "function/imagenet_class_index.json" in names("411.image-recognition")
    assert "function/torchvision_fallback/torchvision/models.py" in names("411.image-recognition")


def test_zips_are_reproducible(tmp_path: Path) -> None:
    bench = catalog.BENCHMARKS["210.thumbnailer"]
    a = packaging.build(bench, tmp_path / "a").path.read_bytes()
    b = packaging.build(bench, tmp_path / "b").path.read_bytes()
    assert a == b


def test_rewrite_tmp_paths() -> None:
    src = "p = '/tmp/{}'.format(k)\nq = os.path.join('/tmp', key)\nr = \"/tmp/x\"\n"
    out, n = packaging.rewrite_tmp_paths(src)
    assert n == 3
    ns: dict = {}
    exec(out.replace("os.path.join", "__import__('os').path.join"), {"k": "a", "key": "b"}, ns)
    import tempfile

    assert ns["p"] == tempfile.gettempdir() + "/a"
    assert ns["q"] == tempfile.gettempdir() + "/b"


def test_resolve_names() -> None:
    assert [b.id for b in catalog.resolve(["110", "sebs-210-thumbnailer", "graph-mst"])] == [
        "110.dynamic-html",
        "210.thumbnailer",
        "502.graph-mst",
    ]
    assert catalog.resolve(["110,120"])[1].id == "120.uploader"
    with pytest.raises(ValueError, match="unknown benchmark"):
        catalog.resolve(["999"])
    assert all("." not in b.action_name for b in catalog.BENCHMARKS.values())


def test_cli_list_and_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ow_invoker import cli

    assert cli.main(["sebs", "list"]) == 0
    assert "sebs-411-image-recognition" in capsys.readouterr().out
    assert cli.main(["sebs", "package", "010", "110", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.zip")) == [
        "sebs-010-sleep.zip",
        "sebs-110-dynamic-html.zip",
    ]
