"""``python -m distconv.deploy [FOLDER]``: rewrite the example manifests (default ``k8s``)."""

from __future__ import annotations

import sys

from distconv.deploy.render import write_examples

USAGE = "usage: python -m distconv.deploy [FOLDER]  (rewrites the example manifests; default k8s)"


def main(argv: list[str] | None = None) -> int:
    """Render every example into FOLDER and list the files written."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    # an option is no folder: `--help` or a typo must not become a folder of manifests
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(USAGE, file=sys.stderr)
        return 2
    for path in write_examples(args[0] if args else "k8s"):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
