"""The bundled trainer: async GRPO-style RL with pluggable advantages and losses (``vf-rl``).

Needs the ``rl`` extra (torch, transformers). Pieces: ``losses`` (pure functions over token
tensors), ``advantages``, ``batching`` (samples, packing), ``trainer``, ``orchestrator``, ``loop``.
"""
