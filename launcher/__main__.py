"""``python -m distconv.launch``: the same as the ``distconv-launch`` command."""

from .interrupt import defer

defer()  # first: a Ctrl-C or SIGTERM while cli imports is kept for main (launcher.interrupt)

from .cli import main  # noqa: E402

raise SystemExit(main())
