"""``python -m distconv.deploy [FOLDER]``: rewrite the example manifests (default ``k8s``)."""

from __future__ import annotations

import sys

from distconv.deploy.render import write_examples


def main(argv: list[str] | None = None) -> int:
    """Render every example into FOLDER and list the files written."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: python -m distconv.deploy [FOLDER]", file=sys.stderr)
        return 2
    for path in write_examples(args[0] if args else "k8s"):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
