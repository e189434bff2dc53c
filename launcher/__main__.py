"""``python -m distconv.launch``: the same as the ``distconv-launch`` command."""

from .cli import main

raise SystemExit(main())
