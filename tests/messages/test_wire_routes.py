"""``to_wire_message`` and ``normalize_messages`` decide how to treat a message once per class
(the checks, pydantic's ``isinstance`` a Python-level call, ran for every message of the history
at every model call): each kind of message converts as it did, twice in a row (the second time
from the remembered route), and an object posing as another class (``__class__``), or a model
whose ``role`` is an extra of its own rather than a field, is looked at each time, never
remembered for its type."""

from __future__ import annotations

from typing import Any

import verifiers as vf
from verifiers.messages import convert
from verifiers.messages.convert import normalize_messages, to_wire_message
from verifiers.messages.dicts import MessageDict
from verifiers.messages.models import MessageModel

CALL = vf.ToolCall(id="c1", name="add", arguments='{"a": 1}')


def test_each_kind_of_message_converts_as_it_did_and_again_from_its_route():
    cases: list[tuple[Any, dict]] = [
        ({"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}),
        (MessageDict({"role": "tool", "content": "5"}), {"role": "tool", "content": "5"}),
        (
            vf.AssistantMessage(content="ok", tool_calls=[CALL]),
            {
                "role": "assistant",
                "content": "ok",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'},
                    }
                ],
                "reasoning_content": None,
            },
        ),
        (
            vf.ToolMessage(tool_call_id="c1", content="2"),
            {"role": "tool", "tool_call_id": "c1", "content": "2"},
        ),
        (vf.TextMessage(content="raw"), {"role": "user", "content": "raw"}),
        (vf.UserMessage(content="question"), {"role": "user", "content": "question"}),
        (vf.SystemMessage(content="be brief"), {"role": "system", "content": "be brief"}),
    ]
    for message, wire in cases:
        assert to_wire_message(message) == wire
        assert to_wire_message(message) == wire


class Posing:
    """Not a message: claims to be an assistant message through ``__class__``."""

    role, content, tool_calls, reasoning_content, model_extra = "assistant", "x", None, None, {}

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return vf.AssistantMessage


def test_an_object_posing_as_a_message_class_is_not_remembered_for_its_type():
    assert to_wire_message(Posing())["role"] == "assistant"
    assert Posing not in convert._ROUTES  # looked at again, each time
    assert type(vf.AssistantMessage()) in convert._ROUTES
    try:
        to_wire_message(object())
    except TypeError as error:
        assert "not a chat message: object" in str(error)
    else:
        raise AssertionError("a plain object is not a chat message")


class Extra(MessageModel):
    """A model with no ``role`` field: a role only as an extra of one instance."""

    content: str


def test_normalize_keeps_typed_messages_and_looks_at_role_extras_each_time():
    user = vf.UserMessage(content="q")
    reply = vf.AssistantMessage(content="a")
    for _ in range(2):
        out = normalize_messages([user, {"role": "user", "content": "d"}, reply])
        assert out[0] is user and out[2] is reply
        assert isinstance(out[1], vf.UserMessage) and out[1].content == "d"
    with_role = Extra(content="c", role="user")
    assert normalize_messages([with_role])[0] is with_role
    assert Extra not in convert._TYPED
    without = Extra(content="c")
    try:
        normalize_messages([without])
    except TypeError as error:
        assert "Invalid messages item type: Extra" in str(error)
    else:
        raise AssertionError("a model without a role is not a message")
