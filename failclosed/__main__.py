"""``python -m failclosed``: the command line (failclosed.cli)."""

import sys

from failclosed.cli import main

sys.exit(main())
