"""Web actions annotated ``require-whisk-auth``, on a live platform (real python runtimes,
embedded bus and store), as the stock controller answers them (``WebActions.scala``,
``confirmAuthenticated``): ``true`` asks for any valid API key by basic auth (the action sees
the caller's namespace as ``__ow_user``), a string or number for that value in
``X-Require-Whisk-Auth``, anything else refuses every call; 401 with akka-http's text."""

from __future__ import annotations

import pytest

from front.identities import GUEST_AUTH, SYSTEM, Identities, basic_auth
from front.webauth import UNAUTHORIZED
from tests.front_platform import Platform
from tests.integration.front.conftest import put_action

ALICE = "a11ce000-0000-4000-8000-000000000001:" + "k" * 64
IDENTITIES = Identities.parse(
    [f"guest={GUEST_AUTH}", f"whisk.system={SYSTEM.authkey['api_key']}", f"alice={ALICE}"]
)
CODE = "def main(args):\n    return {'ok': True, 'user': args.get('__ow_user')}\n"
URL = "/api/v1/web/guest/default/{}.json"
ANON = {"Authorization": ""}  # the platform's client sends the guest key by default

pytestmark = pytest.mark.front_options(identities=IDENTITIES)


async def web_action(p: Platform, name: str, **annotations: object) -> None:
    marks = [{"key": "web-export", "value": True}]
    marks += [{"key": k.replace("_", "-"), "value": v} for k, v in annotations.items()]
    await put_action(p, name, CODE, annotations=marks)


def refused(status: int, body: object) -> bool:
    return status == 401 and isinstance(body, dict) and body["error"] == UNAUTHORIZED


async def test_true_asks_for_a_valid_key_of_any_subject(live: Platform):
    await web_action(live, "secure", require_whisk_auth=True)
    url = URL.format("secure")
    assert refused(*await live.call("GET", url, headers=ANON))
    wrong = {"Authorization": basic_auth(GUEST_AUTH[:-1] + "x")}
    assert refused(*await live.call("GET", url, headers=wrong))
    assert refused(*await live.call("GET", url, headers={**ANON, "X-Require-Whisk-Auth": "true"}))
    status, body = await live.call("GET", url, headers={"Authorization": basic_auth(GUEST_AUTH)})
    assert status == 200 and body == {"ok": True, "user": "guest"}
    # As stock: any authenticated subject, which the action can check itself (__ow_user).
    status, body = await live.call("POST", url, headers={"Authorization": basic_auth(ALICE)})
    assert status == 200 and body == {"ok": True, "user": "alice"}


async def test_a_secret_must_come_in_the_header(live: Platform):
    await web_action(live, "hooked", require_whisk_auth="s3cret-value")
    await web_action(live, "numbered", require_whisk_auth=4242)
    url = URL.format("hooked")
    assert refused(*await live.call("GET", url, headers=ANON))
    assert refused(*await live.call("GET", url, headers={**ANON, "X-Require-Whisk-Auth": "s"}))
    # A valid key is not the secret.
    guest = {"Authorization": basic_auth(GUEST_AUTH)}
    assert refused(*await live.call("GET", url, headers=guest))
    right = {**ANON, "X-Require-Whisk-Auth": "s3cret-value"}
    status, body = await live.call("GET", url, headers=right)
    assert status == 200 and body == {"ok": True, "user": None}
    url = URL.format("numbered")
    assert refused(*await live.call("GET", url, headers={**ANON, "X-Require-Whisk-Auth": "4243"}))
    status, body = await live.call("PUT", url, headers={**ANON, "X-Require-Whisk-Auth": "4242"})
    assert status == 200 and body["ok"] is True


async def test_an_unreadable_requirement_refuses_and_none_lets_anyone_in(live: Platform):
    await web_action(live, "closed", require_whisk_auth=False)
    await web_action(live, "open")
    guest = {"Authorization": basic_auth(GUEST_AUTH)}
    assert refused(*await live.call("GET", URL.format("closed"), headers=guest))
    status, body = await live.call("GET", URL.format("open"), headers=ANON)
    assert status == 200 and body == {"ok": True, "user": None}
