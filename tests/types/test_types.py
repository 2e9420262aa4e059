from verifiers.types import ModelResponse, State


def test_state_input_fields_forward_to_input():
    state = State(
        input={
            "prompt": [{"role": "user", "content": "hi"}],
            "answer": "42",
            "info": {},
            "task": "t",
            "example_id": 3,
        }
    )
    assert state["answer"] == "42"
    assert "answer" in state and state.get("task") == "t"
    state["answer"] = "43"
    assert state["input"]["answer"] == "43"
    state["turn"] = 1
    assert "turn" not in state["input"] and state["turn"] == 1


def test_state_without_input_behaves_like_dict():
    state = State(answer="x")
    assert state["answer"] == "x"
    assert state.get("missing", 5) == 5


def test_model_response_attribute_access():
    response = ModelResponse(
        {"id": "r1", "choices": [{"message": {"content": "hello", "tool_calls": None}}]}
    )
    assert response.choices[0].message.content == "hello"
    assert response.choices[0].message.tool_calls is None
    assert response["choices"][0]["message"]["content"] == "hello"
    assert response.missing is None
