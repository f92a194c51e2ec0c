"""Create a first action on a running OpenWhisk API and invoke it, printing what happens.

python scripts/first_action.py http://127.0.0.1:3233

The key: ``OW_AUTH`` (uuid:key) when set, else the stock guest key; never a flag, which every
process on the machine could read.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request

from front.identities import basic_auth
from whisk.client import default_auth

CODE = """def main(args):
    name = args.get("name", "stranger")
    print("hello from a python action")
    return {"greeting": f"Hello {name}!"}
"""


def call(api: str, method: str, path: str, body: object = None) -> tuple[int, object]:
    req = urllib.request.Request(
        api + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": basic_auth(default_auth()), "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=70) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def main(api: str) -> int:
    ns = "/api/v1/namespaces/_"
    status, _ = call(
        api,
        "PUT",
        f"{ns}/actions/hello?overwrite=true",
        {"exec": {"kind": "python:default", "code": CODE}},
    )
    print(f"created action 'hello' (HTTP {status})")
    for name in ("World", "again"):
        start = time.perf_counter()
        status, record = call(api, "POST", f"{ns}/actions/hello?blocking=true", {"name": name})
        ms = (time.perf_counter() - start) * 1000
        assert isinstance(record, dict)
        init = [a["value"] for a in record.get("annotations", []) if a["key"] == "initTime"]
        start_kind = f"cold start, init {init[0]} ms" if init else "warm"
        print(
            f"invoked hello -> HTTP {status} in {ms:.1f} ms ({start_kind}): "
            f"{json.dumps(record['response']['result'])}"
        )
        aid = record["activationId"]
        for _ in range(50):  # the record is stored just after the result is sent
            status_logs, logs = call(api, "GET", f"{ns}/activations/{aid}/logs")
            if status_logs == 200:
                print(f"  activation {aid} logs: {logs['logs']}")
                break
            time.sleep(0.1)
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:3233"))
