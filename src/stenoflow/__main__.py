"""``python -m stenoflow``: the command line (see :mod:`stenoflow.cli`)."""

import sys

from stenoflow.cli import main

sys.exit(main())
