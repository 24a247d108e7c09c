"""``python -m stenoflow.cli``: the command line."""

from stenoflow.cli import run

run()
