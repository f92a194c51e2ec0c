"""Activation records per second into the CouchDB-API server (pouchdb-server), one document
per request vs ``_bulk_docs`` batches: why the record writer batches (its 20 ms linger).

Writes activation-record-shaped documents through the invoker's own ``CouchStore``, one
request at a time as a writer without batching would, then in batches of each ``--batch``
size; the baseline is the one-by-one rate measured in the same run.

    python benchmarks/bench_record_store.py [--docs 2000] [--batch 10 --batch 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid

from common import STATE, exclusive_machine  # also puts the project on sys.path

from harness.services import COUCHDB_PASSWORD, COUCHDB_USER, CouchDBService
from whisk.store.couch import CouchStore


def record(i: int) -> dict:
    """A no-op activation's record, as the invoker stores it."""
    aid = uuid.uuid4().hex
    return {
        "_id": f"guest/{aid}",
        "activationId": aid,
        "namespace": "guest",
        "name": "noop",
        "subject": "guest",
        "version": "0.0.1",
        "publish": False,
        "start": 1_764_000_000_000 + i,
        "end": 1_764_000_000_002 + i,
        "duration": 2,
        "response": {"statusCode": 0, "result": {"ok": True}},
        "logs": [],
        "annotations": [
            {"key": "path", "value": "guest/noop"},
            {"key": "kind", "value": "python:3.11"},
            {"key": "limits", "value": {"timeout": 60000, "memory": 256, "logs": 10}},
            {"key": "waitTime", "value": 1},
        ],
    }


async def measure(store: CouchStore, db: str, docs: int, batch: int) -> float:
    """Documents per second, ``batch`` per request (1: one PUT per document), in sequence."""
    items = [record(i) for i in range(docs)]
    t0 = time.perf_counter()
    if batch == 1:
        for doc in items:
            await store.put(db, doc)
    else:
        for k in range(0, docs, batch):
            results = await store.bulk(db, items[k : k + batch])
            assert all(r.error is None for r in results), results
    return docs / (time.perf_counter() - t0)


async def run(args, couch: CouchDBService) -> None:
    store = CouchStore(couch.url, couch.user, couch.password)
    try:
        await store.wait_ready()
        rates = {}
        for batch in [1, *args.batch]:
            db = f"bench_activations_{batch}"
            await store.ensure_db(db)
            await measure(store, db, min(100, args.docs), batch)  # warm up the db and client
            rates[batch] = await measure(store, db, args.docs, batch)
    finally:
        await store.close()
    print(f"== activation records into pouchdb-server, {args.docs} documents per row")
    for batch, rate in rates.items():
        how = "one by one (baseline)" if batch == 1 else f"batches of {batch}"
        print(f"{how:>24}: {rate:7.0f} docs/s  x{rate / rates[1]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2000, help="documents per row")
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 10 and 50)")
    ap.add_argument("--port", type=int, default=25994)
    args = ap.parse_args()
    args.batch = args.batch or [10, 50]
    print(f"cpus: {os.cpu_count()}; load average: {os.getloadavg()[0]:.2f}")
    couch = CouchDBService(STATE, port=args.port, user=COUCHDB_USER, password=COUCHDB_PASSWORD)
    with exclusive_machine():
        try:
            couch.setup()
            asyncio.run(run(args, couch))
        finally:
            couch.teardown()


if __name__ == "__main__":
    main()
