"""``python -m stenoflow.cli``: the command line."""

from stenoflow.cli import main

raise SystemExit(main())
