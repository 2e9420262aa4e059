"""The classic system prompts, character for character (an environment's requests must not change)."""

THINK_BOXED_SYSTEM_PROMPT = (
    "Think step-by-step inside <think>...</think> tags.     "
    "Then, give your final answer inside \\boxed{}."
)
BOXED_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
