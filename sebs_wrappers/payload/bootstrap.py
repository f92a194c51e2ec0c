"""Package bootstrap for a SeBS function, shipped as ``function/__init__.py``.

SeBS's own Docker build leaves this file empty; we use it to make one call use one core and to
give each container process a private temporary directory before the benchmark module loads.
"""

import atexit
import os
import shutil
import sys
import tempfile

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _private_tmp() -> str:
    """The per-container temp dir: $TMPDIR when the platform set one, else a fresh one.

    The benchmark code's fixed ``/tmp/...`` paths are rewritten at packaging time to
    ``tempfile.gettempdir()``, so two containers of one function never share a file.
    """
    tmpdir = os.environ.get("TMPDIR")
    if tmpdir and os.path.realpath(tmpdir) != "/tmp" and os.path.isdir(tmpdir):
        return tmpdir
    path = tempfile.mkdtemp(prefix="sebs-")
    atexit.register(shutil.rmtree, path, True)
    return path


tempfile.tempdir = _private_tmp()

_HERE = os.path.dirname(os.path.abspath(__file__))


def _ffmpeg() -> None:
    if "SEBS_FFMPEG_BINARY" in os.environ:
        return
    try:
        import imageio_ffmpeg

        os.environ["SEBS_FFMPEG_BINARY"] = imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:
        found = shutil.which("ffmpeg")
        if found:
            os.environ["SEBS_FFMPEG_BINARY"] = found


def _torchvision() -> None:
    """Use the plain-torch stand-in when torchvision is absent or fails beside this torch."""
    try:
        import torch

        torch.set_num_threads(1)
        import torchvision.models
        import torchvision.transforms  # noqa: F401
    except Exception:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        sys.path.insert(0, os.path.join(_HERE, "torchvision_fallback"))


if os.path.isdir(os.path.join(_HERE, "ffmpeg")):
    _ffmpeg()
if os.path.isdir(os.path.join(_HERE, "torchvision_fallback")):
    _torchvision()
