# PYTHON_ARGCOMPLETE_OK
"""``python -m pinlab.cli``."""

import sys

from pinlab.cli import console_main

sys.exit(console_main())
