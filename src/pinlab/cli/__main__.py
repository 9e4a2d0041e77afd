# PYTHON_ARGCOMPLETE_OK
"""``python -m pinlab.cli``."""

import sys

from pinlab.cli import main

sys.exit(main())
