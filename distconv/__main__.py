"""``python -m distconv``: the same as the ``distconv`` command."""

from distconv.cli import main

raise SystemExit(main())
