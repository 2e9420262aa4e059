"""vf-eval, by job: ``settings`` (every flag, declared once), ``checks`` (what is refused before
anything starts), ``run`` (the run), ``rescore`` (``--rescore RUN_DIR``), ``clients`` (the model
client) and ``defaults`` (an environment's ``[tool.verifiers.eval]`` table). The console script
is ``verifiers.cli.eval:main``."""

from verifiers.cli.eval.run import main

__all__ = ["main"]
