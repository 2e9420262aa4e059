"""The configs of the v1 commands (``eval``): the blocks a run composes plus its own knobs."""
