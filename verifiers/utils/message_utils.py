"""Classic module path ``verifiers.utils.message_utils``."""

from verifiers.envs.messages import concat_messages, strip_nones_from_content

__all__ = ["concat_messages", "strip_nones_from_content"]
