"""``python -m stenoflow``: the command line (see :mod:`stenoflow.cli`)."""

from stenoflow.cli import run

run()
