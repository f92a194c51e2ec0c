"""The attack set against ``--sandbox none``, run by
``test_unsandboxed_containers_are_reachable_which_is_why_the_sandbox_is_default`` in a mount
namespace of its own (``unshare --mount --propagation private``): as root, unsandboxed, the
attacks succeed, and its ``mount`` would otherwise cover the host's ``/tmp``.

    # prints the attacks' JSON:
    python -m tests.integration.containers.runtimes.unsandboxed_probe STATE_DIR PORT
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from containers.process.backend import ProcessBackend
from tests.integration.containers.backends import Maker, new_prefix, result, run
from tests.integration.containers.runtimes.test_sandbox import ATTACKS_PY, VICTIM_PY, targets


async def attack(state_dir: Path, port: int) -> dict[str, Any]:
    b = ProcessBackend(state_dir, new_prefix(), sandbox=False)
    await b.start()
    try:
        make = Maker(b)
        alice = await make(VICTIM_PY)
        bob = await make(ATTACKS_PY)
        t = targets(b, alice, port)
        return result(await run(bob, {"targets": t, "unsandboxed": True}))
    finally:
        await b.close()
        await b.remove_leftovers()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(attack(Path(sys.argv[1]), int(sys.argv[2])))))
