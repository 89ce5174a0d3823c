"""``python -m seglog ...``: the same command line as the ``seglog`` console script."""

import sys

from .cli import main

sys.exit(main())
