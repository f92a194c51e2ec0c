"""Synthetic input data for the SeBS benchmarks, laid out where their ``input.py`` looks.

SeBS downloads its inputs (images, a video, a LaTeX tree, a genome, ResNet weights) from the
internet; here only package registries are reachable, so each input is generated, seeded and
cached: Pillow images, an ffmpeg ``testsrc2`` video, a directory tree of text and binary files,
a random FASTA genome, and ResNet-50 weights drawn at random.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

# File names SeBS's input generators or its default inputs refer to
THUMBNAIL_KEY = "6_astronomy-desktop-wallpaper-evening-1624438.jpg"
RESNET_WEIGHTS = "resnet50-19c8e357.pth"
RESNET_SCRIPTED = "resnet50.pt"
UPLOADER_FILES = {
    # size -> (file name in the SeBS URL, bytes of the original)
    "test": ("800px-Jammlich_crop.jpg", 230_000),
    "small": ("1.4.0.zip", 6_700_000),
    "large": (RESNET_WEIGHTS, 98_000_000),
}
FASTA_BASES = 4_200_000  # about the Bacillus subtilis genome SeBS uses


def ffmpeg_exe() -> str:
    """imageio-ffmpeg's bundled binary, else ``ffmpeg`` on PATH."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as e:
        found = shutil.which("ffmpeg")
        if not found:
            msg = "no ffmpeg: pip install imageio-ffmpeg (or apt-get install ffmpeg)"
            raise RuntimeError(msg) from e
        return found


def _cached(target: Path, params: dict, make: Callable[[Path], object]) -> Path:
    """Run ``make(target)`` unless ``target`` was already made with the same ``params``.

    The stamp is a hidden file beside a file target and inside a directory target, so SeBS's
    ``input.py`` (which lists data directories) never takes it for a dataset.
    """
    is_dir = params.get("kind") == "dir"
    stamp = target / ".params.json" if is_dir else target.parent / f".{target.name}.params.json"
    want = json.dumps(params, sort_keys=True)
    if target.exists() and stamp.exists() and stamp.read_text() == want:
        return target
    if target.is_dir():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    make(target)
    stamp.write_text(want)
    return target


def make_image(path: Path, size: tuple[int, int] = (1920, 1080), seed: int = 0, quality: int = 90):
    """A photo-like JPEG: smooth gradients, shapes and a little noise (compresses like a photo)."""

    def make(p: Path) -> None:
        from PIL import Image, ImageDraw, ImageFilter

        rnd = random.Random(seed)
        w, h = size
        r = Image.linear_gradient("L").rotate(rnd.uniform(0, 360), expand=False).resize(size)
        g = Image.radial_gradient("L").resize(size)
        b = Image.linear_gradient("L").transpose(Image.Transpose.ROTATE_90).resize(size)
        img = Image.merge("RGB", (r, g, b))
        draw = ImageDraw.Draw(img)
        for _ in range(40):
            x0, y0 = rnd.randrange(w), rnd.randrange(h)
            x1, y1 = x0 + rnd.randrange(20, w // 3), y0 + rnd.randrange(20, h // 3)
            colour = tuple(rnd.randrange(256) for _ in range(3))
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        img = img.filter(ImageFilter.GaussianBlur(2))
        noise = Image.effect_noise(size, 24).convert("RGB")
        img = Image.blend(img, noise, 0.08)
        img.save(p, "JPEG", quality=quality)

    return _cached(path, {"size": size, "seed": seed, "quality": quality, "v": 1}, make)


def make_video(path: Path, seconds: int = 10, size: str = "1280x720", rate: int = 25) -> Path:
    """An H.264 (or MPEG-4 part 2) clip of ffmpeg's ``testsrc2`` pattern."""

    def make(p: Path) -> None:
        src = ["-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}", "-t", str(seconds)]
        for codec in (["-c:v", "libx264", "-pix_fmt", "yuv420p"], ["-c:v", "mpeg4", "-q:v", "3"]):
            cmd = [ffmpeg_exe(), "-y", "-loglevel", "error", *src, *codec, str(p)]
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                return
        raise RuntimeError(f"ffmpeg could not encode {p}")

    return _cached(path, {"seconds": seconds, "size": size, "rate": rate, "v": 1}, make)


_WORDS = [
    "function",
    "call",
    "scheduling",
    "node",
    "core",
    "queue",
    "policy",
    "latency",
    "stretch",
    "container",
    "cold",
    "warm",
    "invoker",
    "controller",
    "activation",
    "action",
    "request",
    "response",
    "median",
    "percentile",
    "throughput",
    "memory",
    "load",
]


def make_tree(path: Path, files: int = 40, total_bytes: int = 8_000_000, seed: int = 0) -> Path:
    """A source-tree-like directory: mostly text, some binary, a few levels deep."""

    def make(root: Path) -> None:
        rnd = random.Random(seed)
        per_file = total_bytes // files
        for i in range(files):
            sub = root.joinpath(*[f"dir{rnd.randrange(4)}" for _ in range(rnd.randrange(3))])
            sub.mkdir(parents=True, exist_ok=True)
            n = max(1, int(rnd.uniform(0.2, 1.8) * per_file))
            if i % 5 == 0:
                (sub / f"blob{i}.bin").write_bytes(rnd.randbytes(n))
            else:
                words: list[str] = []
                size = 0
                while size < n:
                    line = " ".join(rnd.choices(_WORDS, k=12))
                    words.append(line)
                    size += len(line) + 1
                (sub / f"file{i}.tex").write_text("\n".join(words))

    params = {"kind": "dir", "files": files, "bytes": total_bytes, "seed": seed, "v": 1}
    return _cached(path, params, make)


def make_fasta(path: Path, bases: int = FASTA_BASES, seed: int = 0, width: int = 80) -> Path:
    def make(p: Path) -> None:
        rnd = random.Random(seed)
        seq = "".join(rnd.choices("ACGT", k=bases))
        with p.open("w") as f:
            f.write(f">synthetic random genome, {bases} bases, seed {seed}\n")
            for i in range(0, bases, width):
                f.write(seq[i : i + width] + "\n")

    return _cached(path, {"bases": bases, "seed": seed, "width": width, "v": 1}, make)


def make_random_file(path: Path, size: int, seed: int = 0) -> Path:
    return _cached(
        path,
        {"size": size, "seed": seed},
        lambda p: p.write_bytes(random.Random(seed).randbytes(size)),
    )


def make_resnet_weights(path: Path, seed: int = 0) -> Path:
    """A ResNet-50 state dict with random weights (pretrained weights cannot be downloaded)."""

    def make(p: Path) -> None:
        import torch

        torch.manual_seed(seed)
        model = _resnet50()
        torch.save(model.state_dict(), p)

    return _cached(path, {"seed": seed, "v": 1}, make)


def _resnet50():
    """torchvision's ResNet-50 when it imports, else the packaged plain-torch stand-in."""
    try:
        from torchvision.models import resnet50

        return resnet50()
    except Exception:
        import importlib.util

        from sebs_wrappers.packaging import PAYLOAD

        path = PAYLOAD / "torchvision_fallback" / "torchvision" / "models.py"
        spec = importlib.util.spec_from_file_location("_sebs_tv_models", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.resnet50()


def generate(bench_id: str, data_dir: Path, size: str = "test", **opts: int) -> Path:
    """Lay out the inputs ``bench_id``'s SeBS ``input.py`` expects under ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if bench_id == "210.thumbnailer":
        make_image(data_dir / THUMBNAIL_KEY, seed=6)
        for i in range(2):
            make_image(data_dir / f"synthetic-{i}.jpg", size=(1280, 853), seed=i)
    elif bench_id == "220.video-processing":
        make_video(data_dir / "synthetic-testsrc2.mp4", seconds=int(opts.get("video_seconds", 10)))
    elif bench_id == "311.compression":
        make_tree(data_dir / "synthetic-tree", total_bytes=int(opts.get("tree_bytes", 8_000_000)))
    elif bench_id == "411.image-recognition":
        make_resnet_weights(data_dir / "model" / RESNET_WEIGHTS)
        scripted = data_dir / "model" / RESNET_SCRIPTED
        if not scripted.exists():
            # input.py also uploads the C++ variant's TorchScript model; Python never reads it
            scripted.write_text("placeholder: the Python benchmark does not use this file\n")
        fake = data_dir / "fake-resnet"
        lines = []
        for i in range(4):
            name = f"synthetic_{i}.JPEG"
            make_image(fake / name, size=(500, 375), seed=100 + i)
            lines.append(f"{name} {i}")
        (fake / "val_map.txt").write_text("\n".join(lines) + "\n")
    elif bench_id == "504.dna-visualisation":
        make_fasta(data_dir / "synthetic.fasta", bases=int(opts.get("fasta_bases", FASTA_BASES)))
    return data_dir


def uploader_file(files_dir: Path, size: str) -> str:
    """Serve the file 120.uploader's ``size`` URL names; returns its name."""
    name, nbytes = UPLOADER_FILES[size]
    if name.endswith(".jpg"):
        make_image(files_dir / name, size=(800, 1067), seed=120, quality=95)
    else:
        make_random_file(files_dir / name, nbytes, seed=120)
    return name
