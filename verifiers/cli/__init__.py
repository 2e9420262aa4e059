"""Command-line tools: vf-init, vf-install, vf-eval, vf-serve."""
