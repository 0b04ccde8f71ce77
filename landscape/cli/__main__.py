"""``python -m landscape.cli``."""

import sys

from landscape.cli import main

sys.exit(main())
