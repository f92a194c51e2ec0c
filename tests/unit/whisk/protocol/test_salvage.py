"""The lenient reader of refused messages (whisk/protocol/salvage.py): the exact fields it
reads back, so that a poison message is still answered to the right controller and id."""

from __future__ import annotations

import pytest

from whisk.protocol.errors import EMPTY, NOT_JSON, NOT_UTF8, NUMBER, TOO_DEEP
from whisk.protocol.salvage import classify, shallow_object


@pytest.mark.parametrize(
    ("raw", "error", "kind"),
    [
        (b"", ValueError("depth"), EMPTY),
        ("", ValueError("anything"), EMPTY),
        (b'{"a": "\xff"}', ValueError("number"), NOT_UTF8),  # the bytes decide first
        (b"[[[[", ValueError("maximum depth exceeded"), TOO_DEEP),
        (b"[[[[", RecursionError("Maximum Recursion depth"), TOO_DEEP),
        (b"[[[[", ValueError("RECURSION"), TOO_DEEP),
        ('{"a": "\ud800"}', ValueError("surrogates not allowed"), NOT_UTF8),
        (b"{", ValueError("str is not valid UTF-8"), NOT_UTF8),
        (b"{1e999}", ValueError("number out of range"), NUMBER),
        (b"{", ValueError("unexpected end of data"), NOT_JSON),
        (memoryview(b"{"), ValueError("unexpected character"), NOT_JSON),
    ],
)
def test_a_parse_failure_is_classified_by_its_bytes_then_its_message(raw, error, kind) -> None:
    assert classify(raw, error) == kind


def test_the_answer_fields_are_read_and_the_rest_skipped() -> None:
    raw = (
        b'{"activationId":"abc","content":{"activationId":"no"},"blocking":true,'
        b'"transid":["t1",-17],"rootControllerIndex":{"asString":"0","instanceType":"controller"},'
        b'"cause":null,"extra":1}'
    )
    assert shallow_object(raw) == {
        "activationId": "abc",
        "blocking": True,
        "transid": ["t1", -17],
        "rootControllerIndex": {"asString": "0", "instanceType": "controller"},
        "cause": None,
    }


def test_containers_below_keep_levels_become_none() -> None:
    raw = b'{"user":{"a":{"b":{"c":{"d":1}}}},"action":[[[[1]]]],"blocking":false}'
    assert shallow_object(raw) == {
        "user": {"a": {"b": {"c": None}}},
        "action": [[[None]]],
        "blocking": False,
    }
    assert shallow_object(raw, keep=2) == {
        "user": {"a": None},
        "action": [None],
        "blocking": False,
    }
    assert shallow_object(raw, keep=1) == {"user": None, "action": None, "blocking": False}


def test_a_deep_run_of_brackets_is_skipped_at_once_and_reading_goes_on() -> None:
    deep = 100_000
    raw = b'{"cause":' + b"[" * deep + b"]" * deep + b',"blocking":true}'
    assert shallow_object(raw) == {"cause": [[[None]]], "blocking": True}
    spaced = b'{ "cause" : [ [ [ [ [ ] ] ] ] ] , "activationId" : "x" }'
    assert shallow_object(spaced) == {"cause": [[[None]]], "activationId": "x"}


def test_odd_values_become_none_and_good_ones_stay() -> None:
    raw = (
        b'{"transid":[123456789012345678,1234567890123456789,1.5,1e999,-0,tru,false,null,'
        b'"a\\"b","\\ud800","a\xffb"]}'
    )
    assert shallow_object(raw) == {
        "transid": [
            123456789012345678,
            None,  # beyond 18 digits
            None,
            None,
            0,
            None,
            False,
            None,
            'a"b',
            None,  # a lone surrogate no answer could carry
            "a\ufffdb",
        ]
    }


def test_broken_and_repeated_keys() -> None:
    assert shallow_object(b'{activationId:"x","blocking":true}') == {"blocking": True}
    assert shallow_object(b'{"activationId":"first","activationId":"second"}') == {
        "activationId": "first"
    }
    assert shallow_object(b'{"\\ud800":1,"user":{"\\ud800":2,"k":3}}') == {"user": {"k": 3}}
    # Keys below the top level are all kept; at the top only the wanted ones.
    assert shallow_object(b'{"user":{"anything":1},"other":{"x":2}}') == {"user": {"anything": 1}}
    assert shallow_object(b'{"a":1,"b":2}', fields=frozenset({"b"})) == {"b": 2}


def test_only_the_first_top_level_object_is_read() -> None:
    assert shallow_object(b'{"blocking":false} {"user":1}') == {"blocking": False}
    assert shallow_object(b'{"blocking":false} "user"') == {"blocking": False}
    assert shallow_object(b"[1, 2]") == {}
    assert shallow_object(b'"activationId"') == {}
    assert shallow_object(b'x {"blocking":true}') == {}
    assert shallow_object(b"") == {}


def test_a_truncated_message_keeps_what_came() -> None:
    raw = b'{"activationId":"abc","action":{"name":"hello","path":"guest"},"user":{"subject":"su'
    assert shallow_object(raw) == {
        "activationId": "abc",
        "action": {"name": "hello", "path": "guest"},
        "user": {"subject": None},  # the broken string read as a bare word
    }


def test_text_and_views_are_read_like_bytes() -> None:
    assert shallow_object('{"activationId":"é\ud800"}') == {"activationId": "é?"}
    assert shallow_object(memoryview(b'{"blocking":true}')) == {"blocking": True}
    assert shallow_object(bytearray(b'{"blocking":true}')) == {"blocking": True}


def test_bare_words_are_values_never_brackets_and_never_keys() -> None:
    assert shallow_object(b'{"transid":[Xyz,X,1],"blocking":true}') == {
        "transid": [None, None, 1],
        "blocking": True,
    }
    assert shallow_object(b'{"user":{1:2,true:3,"k":4}}') == {"user": {"k": 4}}


def test_a_container_without_a_key_is_skipped_whole() -> None:
    assert shallow_object(b'{{"activationId":1},"blocking":true}') == {"blocking": True}
    assert shallow_object(b'{[{"activationId":1}],"blocking":true}') == {"blocking": True}
