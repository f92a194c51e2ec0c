"""Blackbox actions without a container engine: image names, what the front stores, what the
invoker reads and sends to ``/init``, and the image the pool asks the backend for.
(End to end on real engines: tests/integration/containers/docker/test_blackbox.py.)"""

from __future__ import annotations

import base64
import io
import zipfile

import pytest

from containers.placement import WarmKey
from containers.pool import ContainerPool
from front.entities import BadRequest, Limits, new_action_document
from tests.unit.containers.test_pool import pool_test
from tests.unit.whisk.protocol.test_actions import doc
from tests.unit.whisk.protocol.test_runtime import _msg
from whisk.manifest import Manifest
from whisk.protocol import ProtocolError, action_from_document
from whisk.protocol.actions import valid_image
from whisk.protocol.runtime import init_body

CODE = "def main(a):\n    return a\n"


@pytest.mark.parametrize(
    "image",
    [
        "openwhisk/dockerskeleton",
        "spcl/serverless-benchmarks:openwhisk-110.dynamic-html-python-3.11",
        "localhost/sebs-python:test",
        "registry.example.com:5000/team/app:1.0",
        "ubuntu",
        "ubuntu@sha256:" + "0" * 64,
    ],
)
def test_docker_image_references_are_accepted(image: str) -> None:
    assert valid_image(image)


@pytest.mark.parametrize("image", ["", "A B", "Upper/Case", "x:", "/x", "x/", "x::1", "a" * 256])
def test_malformed_image_names_are_refused(image: str) -> None:
    assert not valid_image(image)


def create(exec_: dict) -> tuple[dict, bytes | None]:
    return new_action_document(
        "guest",
        "box",
        {"exec": exec_},
        kinds={"python:3.11"},
        kind_defaults={"python": "python:3.11"},
        limits=Limits(),
        now_ms=1,
    )


def test_the_front_stores_blackbox_actions_as_the_stock_controller() -> None:
    stored, code = create({"kind": "blackbox", "image": "user/img:1"})
    assert stored["exec"] == {"kind": "blackbox", "binary": False, "image": "user/img:1"}
    assert code is None
    # Blank code is no code (wsk --docker without an artifact may send "").
    stored, code = create({"kind": "blackbox", "image": "user/img:1", "code": "  "})
    assert "code" not in stored["exec"] and code is None
    # Blackbox plus code: a zip is binary, kept as an attachment like any action's code.
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("__main__.py", CODE)
    encoded = base64.b64encode(zipped.getvalue()).decode()
    stored, code = create({"kind": "blackbox", "image": "user/img:1", "code": encoded})
    assert stored["exec"]["binary"] is True and code == zipped.getvalue()
    assert stored["exec"]["code"]["attachmentName"]
    with pytest.raises(BadRequest, match=r"exec\.image"):
        create({"kind": "blackbox"})
    with pytest.raises(BadRequest, match="image name 'A B' is not valid"):
        create({"kind": "blackbox", "image": "A B"})


def test_init_carries_the_code_only_for_blackbox_plus_code() -> None:
    pure = action_from_document(doc({"kind": "blackbox", "image": "user/img:1", "code": ""}))
    assert pure.is_blackbox and pure.code is None and pure.image == "user/img:1"
    body = init_body(_msg(), pure, 0)["value"]
    assert "code" not in body and body["main"] == "main" and body["binary"] is False
    plus = action_from_document(doc({"kind": "blackbox", "image": "user/img:1", "code": CODE}))
    assert init_body(_msg(), plus, 0)["value"]["code"] == CODE
    with pytest.raises(ProtocolError, match=r"exec\.image"):
        action_from_document(doc({"kind": "blackbox", "image": "not an image"}))


def test_the_pool_creates_a_blackbox_container_from_the_actions_image() -> None:
    key = WarmKey("guest", "guest/box", "1-a")

    async def body(pool: ContainerPool, backend, loop) -> None:
        lease = pool.reserve(key, "blackbox", 256, "user/img:1")
        assert lease is not None
        await pool.prepare(lease, "guest", "box")
        pool.release(lease, healthy=True)
        lease = pool.reserve(WarmKey("guest", "guest/py", "1-b"), "python:3.11", 256)
        assert lease is not None
        await pool.prepare(lease, "guest", "py")
        pool.release(lease, healthy=True)
        assert [(s.kind, s.image) for s in backend.specs] == [
            ("blackbox", "user/img:1"),
            ("python:3.11", "img-of-python:3.11"),
        ]

    pool_test(body, image_for=lambda kind: f"img-of-{kind}")


def test_native_blackbox_images_as_the_stock_manifest_names_them() -> None:
    stock = Manifest()
    assert stock.native("openwhisk/dockerskeleton:nightly")
    assert not stock.native("openwhisk/dockerskeleton")  # latest is another image
    assert not stock.native("user/dockerskeleton:nightly")
    loaded = Manifest.from_stock_json(
        {
            "runtimes": {},
            "blackboxes": [
                {"prefix": "openwhisk", "name": "dockerskeleton", "tag": "1.14.0"},
                {"registry": "reg.example:5000/", "prefix": "team", "name": "box"},
            ],
            "bypassPullForLocalImages": "local",
        }
    )
    assert loaded.native("openwhisk/dockerskeleton:1.14.0")
    assert not loaded.native("openwhisk/dockerskeleton:nightly")
    assert loaded.native("reg.example:5000/team/box") and loaded.native(
        "reg.example:5000/team/box:latest"
    )
    assert loaded.native("local/anything:v2") and not loaded.native("localx/anything:v2")
    assert not loaded.native("anything")
    # Overriding runtime images keeps the blackbox facts.
    assert loaded.with_images({}).blackboxes == loaded.blackboxes
    assert Manifest.from_stock_json({"runtimes": {}}).blackboxes == frozenset()
