"""The bundled trainer: async GRPO-style RL with pluggable advantages and losses (``vf-rl``).

Needs the ``rl`` extra (torch, transformers, peft). Pieces: ``losses`` (pure functions over token
tensors), ``advantages``, ``batching`` (samples, packing), ``head`` (the chunked LM head),
``trainer``, ``orchestrator``, ``loop``; around them ``command`` (vf-rl and vf-sft as commands),
``checkpoint``, ``export``, ``tracking``, ``records`` and ``report`` (training_report.html).
"""
