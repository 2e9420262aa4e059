"""vf-rl's and vf-sft's settings, declared once: ``rl`` (RLConfig and the trainer, inference and loss sections both use) beside ``sft`` (SFTConfig)."""
