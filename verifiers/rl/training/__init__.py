"""A training run's moving parts: rollouts (orchestrator), the RL loop, the inference server, and vf-rl's run (``rl``) beside vf-sft's (``sft``)."""
