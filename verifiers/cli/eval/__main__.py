"""``python -m verifiers.cli.eval``: vf-eval."""

import sys

from verifiers.cli.eval.run import main

sys.exit(main())
