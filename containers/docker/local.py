"""Local stand-ins for the official runtime images, for hosts without a registry.

``scripts/runtime-images.sh`` builds them from the busybox base image with the project's
runtimes (``containers/runtimes/docker_entry.py``); the interpreters come from the host,
whose ``/usr`` every container must bind read-only (:data:`BINDS`). The tests and the
benchmark run the Docker backend with ``images=local_images(), binds=BINDS``.
"""

from __future__ import annotations

from whisk.manifest import Manifest

PYTHON_IMAGE = "localhost/ow-action-python:test"
NODE_IMAGE = "localhost/ow-action-nodejs:test"
BINDS = ("/usr:/usr:ro",)
_BY_FAMILY = {"python": PYTHON_IMAGE, "nodejs": NODE_IMAGE}


def local_images(manifest: Manifest | None = None) -> dict[str, str]:
    """kind -> local image for every python and nodejs kind of the manifest (stock default)."""
    runtimes = (manifest or Manifest()).runtimes.values()
    return {r.kind: _BY_FAMILY[r.family] for r in runtimes if r.family in _BY_FAMILY}
