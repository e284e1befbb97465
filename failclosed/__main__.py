"""``python -m failclosed``: the command line (failclosed.cli)."""

import sys

from failclosed.cli.app import console_main

sys.exit(console_main())
