"""Upstream 0.3's v1 command modules (``cli.eval.runner``), the paths tests import."""
