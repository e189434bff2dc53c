"""``python -m distconv.deploy [FOLDER]``: rewrite the example manifests (default ``k8s``)."""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.deploy.render import EXAMPLES, write_examples
from distconv.files import folder_problem
from distconv.stdout_drop import drop_stdout, write_failure

USAGE = "usage: python -m distconv.deploy [FOLDER]  (rewrites the example manifests; default k8s)"
PROG = "python -m distconv.deploy"


def main(argv: list[str] | None = None) -> int:
    """Render every example into FOLDER and list the files written.

    Returns 0 when written; 2 (on stderr) for an option, a blank FOLDER (an unset variable:
    ``"$OUT"``), which wrote into the working directory, or a FOLDER, or an example's folder in
    it, that a file or a link to nowhere stands in the way of (nothing is written then); 1, in
    one line naming the cause, when the examples cannot be written there (another job's
    manifests in it, a folder this user may not write).
    """
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        return _write_stdout(f"{USAGE}\n", "the usage")
    problem = _usage_problem(args)
    if problem is not None:
        print(f"{USAGE}\n{PROG}: error: {problem}", file=sys.stderr)
        return 2
    root = args[0] if args else "k8s"
    # each example's folder, and so FOLDER above it, before any is written: one in the way
    # (root/mpijob a file) failed in '[Errno 17] File exists' after the first ones were written
    for problem in filter(None, (folder_problem(Path(root, name)) for name in EXAMPLES)):
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    try:
        paths = write_examples(root)
    except (ValueError, OSError) as exc:  # another job's manifests there; no write permission
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return _write_stdout("".join(f"{path}\n" for path in paths), "the list of files written")


def _usage_problem(args: list[str]) -> str | None:
    """What is wrong with ``args`` as ``[FOLDER]``, in one clause; None where nothing is. The
    usage line alone left the operator to guess which of two folders, or which option, was
    refused."""
    if len(args) > 1:
        return f"one FOLDER at most, got {len(args)}: {' '.join(map(repr, args))}"
    # an option is no folder: `--help` or a typo must not become a folder of manifests
    if args and args[0].startswith("-"):
        return (
            f"unknown option {args[0]!r} (the only options are -h and --help; a FOLDER whose "
            f"name starts with '-' is written ./{args[0]})"
        )
    if args and not args[0].strip():
        return "FOLDER must not be empty"
    return None


def _write_stdout(text: str, what: str) -> int:
    """Write ``text`` on stdout and flush it: 0, or 1 with one line on stderr where stdout
    cannot take it (a full disk, ``| head -0``, closed), not print()'s traceback and a second
    one from the flush at exit. The list of files comes after they are written: a failure to
    list them says so, and leaves them written."""
    try:
        if sys.stdout is None:  # started with stdout closed: print() drops it unsaid
            raise OSError(0, "stdout is closed")
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, UnicodeEncodeError) as exc:  # a full disk; a name its encoding lacks
        drop_stdout()
        print(
            f"{PROG}: error: cannot write {what} to stdout: {write_failure(exc)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
