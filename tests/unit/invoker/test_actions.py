"""The action fetcher (invoker/actions.py) on the embedded store: what each failure becomes,
what is cached and what is not, and one request per key however many calls wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from invoker.actions import ActionFetcher, FetchError
from tests.unit.faults import FlakyStore
from whisk.protocol import StatusCode
from whisk.protocol.controller import action_document
from whisk.protocol.runtime import ACTION_NOT_COMPATIBLE, ACTION_NOT_FETCHED, ACTION_NOT_FOUND
from whisk.store.embedded import EmbeddedStore

DB = "whisks"
DEFAULTS = {"python": "python:3.11", "nodejs": "nodejs:20"}
CODE = b"def main(args):\n    return args\n"


@pytest.fixture
async def store() -> AsyncIterator[FlakyStore]:
    s = FlakyStore(EmbeddedStore(":memory:", threaded=False))
    await s.ensure_db(DB)
    yield s
    await s.close()


def fetcher(store: FlakyStore, **kwargs: Any) -> ActionFetcher:
    return ActionFetcher(store, DB, DEFAULTS, **kwargs)


async def put_action(
    store: FlakyStore, name: str = "hello", code: bytes = CODE, **kwargs: Any
) -> str:
    doc = action_document("guest", name, kind=kwargs.pop("kind", "python:default"), code=code)
    doc.update(kwargs)
    old = await store.inner.get(DB, doc["_id"])
    if old is not None:
        doc["_rev"] = old["_rev"]
    return await store.inner.put(DB, doc)


async def test_an_action_is_read_once_per_revision_then_served_from_the_cache(store):
    rev = await put_action(store)
    f = fetcher(store)
    first = await f.fetch("guest/hello", rev)
    assert first.kind == "python:3.11"  # the default kind resolved
    assert first.code == CODE.decode() and first.revision == rev
    again = await f.fetch("guest/hello", rev)
    assert again is first
    assert store.calls["get"] == 1
    assert (f.hits, f.misses) == (1, 1)


async def test_a_new_revision_is_read_again(store):
    f = fetcher(store)
    rev1 = await put_action(store)
    await f.fetch("guest/hello", rev1)
    rev2 = await put_action(store, code=b"def main(a):\n    return {'v': 2}\n")
    assert rev2 != rev1
    action = await f.fetch("guest/hello", rev2)
    assert "'v': 2" in action.code and action.revision == rev2
    assert store.calls["get"] == 2


async def test_without_revision_the_latest_document_is_always_read(store):
    f = fetcher(store)
    rev1 = await put_action(store)
    assert (await f.fetch("guest/hello", None)).revision == rev1
    rev2 = await put_action(store, code=b"def main(a):\n    return {}\n")
    latest = await f.fetch("guest/hello", None)
    assert latest.revision == rev2
    assert store.calls["get"] == 2
    # What was read is cached under its own revision for the calls that name it.
    assert await f.fetch("guest/hello", rev2) is latest
    assert store.calls["get"] == 2


async def test_a_missing_action_is_an_application_error_and_not_remembered(store):
    f = fetcher(store)
    with pytest.raises(FetchError) as e:
        await f.fetch("guest/nothing", "1-abc")
    assert e.value.code is StatusCode.APPLICATION_ERROR
    assert e.value.message == ACTION_NOT_FOUND
    # Created afterwards (the controller's cache was ahead of the database): now found.
    rev = await put_action(store, "nothing")
    assert (await f.fetch("guest/nothing", rev)).name == "nothing"


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"exec": {"kind": "python:3.11"}}, "no code"),
        ({"exec": "not an object"}, "exec"),
        ({"limits": {"memory": "lots"}}, "memory"),
    ],
)
async def test_a_bad_action_document_is_a_whisk_error_with_the_reason(store, change, reason):
    rev = await put_action(store, **change)
    with pytest.raises(FetchError) as e:
        await fetcher(store).fetch("guest/hello", rev)
    assert e.value.code is StatusCode.WHISK_ERROR
    assert e.value.message == ACTION_NOT_COMPATIBLE
    assert reason in str(e.value)


async def test_an_unavailable_store_is_a_whisk_error_and_the_next_call_reads_again(store):
    rev = await put_action(store)
    f = fetcher(store)
    store.down = True
    with pytest.raises(FetchError) as e:
        await f.fetch("guest/hello", rev)
    assert e.value.code is StatusCode.WHISK_ERROR
    assert e.value.message == ACTION_NOT_FETCHED
    assert "connection refused" in str(e.value)  # the store's reason travels with it
    store.down = False
    assert (await f.fetch("guest/hello", rev)).revision == rev


async def test_code_in_an_attachment_is_read_with_the_document(store):
    big = b"def main(args):\n    return args\n" + b"# padding\n" * 3000  # past the inline size
    rev = await put_action(store, code=big)
    doc = await store.inner.get(DB, "guest/hello")
    name = doc["exec"]["code"]["attachmentName"]
    assert name.startswith("couch:")
    rev = await store.inner.put_attachment(
        DB, "guest/hello", rev, name.removeprefix("couch:"), big, "text/plain"
    )
    action = await fetcher(store).fetch("guest/hello", rev)
    assert action.code == big.decode()


async def test_a_missing_or_unreadable_attachment_is_a_whisk_error(store):
    big = b"def main(args):\n    return args\n" + b"# padding\n" * 3000
    rev = await put_action(store, code=big)
    f = fetcher(store)
    with pytest.raises(FetchError) as e:
        await f.fetch("guest/hello", rev)
    assert (e.value.code, e.value.message) == (StatusCode.WHISK_ERROR, ACTION_NOT_FETCHED)
    assert "attachment missing" in str(e.value)
    name = (await store.inner.get(DB, "guest/hello"))["exec"]["code"]["attachmentName"]
    rev = await store.inner.put_attachment(
        DB, "guest/hello", rev, name.removeprefix("couch:"), big, "text/plain"
    )
    store.attachments_down = True
    with pytest.raises(FetchError) as e:
        await f.fetch("guest/hello", rev)
    assert (e.value.code, e.value.message) == (StatusCode.WHISK_ERROR, ACTION_NOT_FETCHED)
    assert "timed out" in str(e.value)
    store.attachments_down = False
    assert (await f.fetch("guest/hello", rev)).code == big.decode()


async def test_concurrent_calls_of_one_revision_share_one_read(store):
    rev = await put_action(store)
    f = fetcher(store)
    store.gate = asyncio.Event()
    calls = [asyncio.ensure_future(f.fetch("guest/hello", rev)) for _ in range(5)]
    await asyncio.sleep(0.01)
    store.gate.set()
    actions = await asyncio.gather(*calls)
    assert store.calls["get"] == 1
    assert all(a is actions[0] for a in actions)


async def test_concurrent_calls_all_get_the_error_of_their_shared_read(store):
    f = fetcher(store)
    store.gate = asyncio.Event()
    calls = [asyncio.ensure_future(f.fetch("guest/gone", "1-abc")) for _ in range(3)]
    await asyncio.sleep(0.01)
    store.gate.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert store.calls["get"] == 1
    assert all(isinstance(r, FetchError) and r.message == ACTION_NOT_FOUND for r in results)


async def test_the_cache_keeps_the_most_recently_used_entries(store):
    f = fetcher(store, max_entries=2)
    revs = {n: await put_action(store, n) for n in ("a", "b", "c")}
    await f.fetch("guest/a", revs["a"])
    await f.fetch("guest/b", revs["b"])
    await f.fetch("guest/a", revs["a"])  # a is now the most recent
    await f.fetch("guest/c", revs["c"])  # evicts b
    assert store.calls["get"] == 3
    await f.fetch("guest/a", revs["a"])
    assert store.calls["get"] == 3
    await f.fetch("guest/b", revs["b"])
    assert store.calls["get"] == 4
