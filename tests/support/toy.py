"""A toy policy and task for testing and benchmarking the trainer on CPU in seconds.

``make_tiny_policy`` writes a small random Llama with a character-level tokenizer and a plain chat
template to a directory (no download); ``letter_env`` rewards the fraction of a chosen letter in
the reply. A random policy says the letter about 1/80 of the time, and RL raises that quickly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHARS = list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 .,?!:;'\"-\n<>|_/()")
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def make_tiny_policy(directory: Path, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    import tokenizers
    import torch
    from tokenizers import decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<pad>", "<eos>", "<unk>", *CHARS])}
    core = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=vocab["<eos>"],
        pad_token_id=vocab["<pad>"],
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def letter_env(letter: str = "A", num_examples: int = 64) -> Any:
    import verifiers as vf

    def letter_fraction(completion, **kwargs) -> float:
        """Share of the reply that is the letter (the toy's only goal)."""
        text = completion[-1]["content"] if completion else ""
        return text.count(letter) / max(len(text), 1)

    rows = [{"question": f"Say {letter}. ({i})", "answer": letter} for i in range(num_examples)]
    return vf.SingleTurnEnv(
        dataset=rows, rubric=vf.Rubric(funcs=[letter_fraction]), env_id=f"letter-{letter}"
    )


def tiny_llama(vocab_size: int = 64, seed: int = 0) -> Any:
    """A 2-layer random Llama for gradient tests (milliseconds per step)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
    )


def random_samples(n: int = 5, vocab_size: int = 64, seed: int = 1) -> list[Any]:
    """Samples of varied length: 3 prompt tokens, the rest model tokens, advantages i - 2, and
    recorded logprobs of a uniform policy (what an untrained model gives: ratios near 1)."""
    import math

    import torch

    from verifiers.rl.algorithm.batching import Sample

    g = torch.Generator().manual_seed(seed)
    uniform = -math.log(vocab_size)
    samples = []
    for i in range(n):
        length = int(torch.randint(6, 14, (1,), generator=g))
        ids = torch.randint(1, vocab_size, (length,), generator=g).tolist()
        mask = [0] * 3 + [1] * (length - 3)
        samples.append(
            Sample(ids, mask, [(uniform if m else 0.0) for m in mask], float(i) - 2.0, 0.0, 0)
        )
    return samples
