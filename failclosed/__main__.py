"""``python -m failclosed``: the command line (failclosed.sim.cli)."""

import sys

from failclosed.sim.cli import main

sys.exit(main())
