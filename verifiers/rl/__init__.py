"""The bundled trainer: async GRPO-style RL with pluggable advantages and losses (``vf-rl``), and SFT
(``vf-sft``) on the same trainer core.

Needs the ``rl`` extra (torch, transformers, peft). Rooms: ``configs`` (``RLConfig`` beside
``SFTConfig``), ``algorithm`` (losses: pure functions over token tensors, advantages, batching,
the chunked LM head, the trainer), ``training`` (orchestrator, loop, inference server, and the
vf-rl and vf-sft runs) and ``run`` (what a run leaves on disk: lock, checkpoints, export,
tracking, records, training_report.html). The commands' entry points are ``verifiers.cli.rl``
and ``verifiers.cli.sft``.
"""
