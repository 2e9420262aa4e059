"""``make_client`` looks a client it has seen up before it checks the object against the
``ModelClient`` protocol (what each model call of a rollout asks it): a client seen before gets
the same ``vf.Client`` (one per API kind), one not seen is checked and cached, a base URL is
never cached, and an object that is no client is refused however often it is asked."""

from __future__ import annotations

import pytest

from verifiers.clients import OpenAICompatibleClient, make_client
from verifiers.clients.openai_chat_completions_client import OpenAIChatCompletionsClient
from verifiers.clients.openai_completions_client import OpenAICompletionsClient


def test_a_client_seen_before_gets_the_same_typed_client_per_kind():
    transport = OpenAICompatibleClient("http://127.0.0.1:9/v1")
    chat = make_client(transport)
    assert isinstance(chat, OpenAIChatCompletionsClient)
    assert make_client(transport) is chat
    assert make_client(transport, "chat") is chat
    completion = make_client(transport, "completion")
    assert isinstance(completion, OpenAICompletionsClient)
    assert make_client(transport, "completion") is completion is not chat
    other = OpenAICompatibleClient("http://127.0.0.1:9/v1")
    assert make_client(other) is not chat  # per client object, not per URL


def test_a_base_url_gets_a_new_client_each_time():
    first = make_client("http://127.0.0.1:9/v1")
    assert isinstance(first, OpenAIChatCompletionsClient)
    assert make_client("http://127.0.0.1:9/v1") is not first


class NotAClient:
    """No ``chat``: neither the protocol nor the duck test admits it."""


def test_an_object_that_is_no_client_is_refused_every_time():
    thing = NotAClient()
    for _ in range(2):
        with pytest.raises(TypeError, match=r"expected a vf\.Client"):
            make_client(thing)


def test_a_vf_client_is_returned_as_it_is():
    typed = make_client(OpenAICompatibleClient("http://127.0.0.1:9/v1"))
    assert make_client(typed) is typed
