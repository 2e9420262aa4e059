"""Compatibility module paths of classic verifiers (``verifiers.utils.data_utils`` and friends)."""
