"""A stop signal whose handler was set outside Python is given back as the default's.

A program that embeds Python and set its own C handler before Python started (or an
extension that did before the signal module read them) has ``signal.getsignal()`` answer
None. :func:`launcher.interrupt.defer` and the supervisor recorded that None, and gave it back
with ``signal.signal(signum, None)``, which raises TypeError: ``main()`` raised it in place of
its status or its usage error, and the launcher's handler stayed in, keeping the next SIGTERM
for good. Here the signal module is made to read a C handler as such an embedding's does: the
handler set with libc's ``signal()``, then the ``_signal`` module executed again."""

from __future__ import annotations

import signal

import pytest

from tests.launcher.c_handler import C_HANDLER_ON_SIGTERM, SIGTERM_ENDS_IT
from tests.launcher.launch_cli import run_python

#: a C handler on SIGTERM that Python reads as None, then ``main(ARGV)`` (or a supervisor run,
#: for ARGV ``supervisor``), then a SIGTERM to itself: it must end the process
C_HANDLER = f"""{C_HANDLER_ON_SIGTERM}import sys
if sys.argv[1:] == ["supervisor"]:
    from launcher.child_spec import ChildSpec
    from launcher.supervisor import Supervisor
    job = [ChildSpec("worker", 0, [sys.executable, "-c", "raise SystemExit(3)"])]
    print("ended", Supervisor("run").run(lambda restart: job), flush=True)
else:  # the installed command: the import keeps the stop signals (defer) for main
    sys.argv[0] = "/usr/local/bin/distconv-launch"
    import launcher
    from launcher.cli import main
    try:
        print("ended", main(sys.argv[1:]), flush=True)
    except SystemExit as exc:
        print("ended", exc.code, flush=True)
{SIGTERM_ENDS_IT}"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("argv", "ended"),
    [
        (["local", "--bogus"], "ended 2"),
        (
            ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "f.py"],
            "ended 3",
        ),
        (["supervisor"], "ended 3"),
    ],
    ids=["usage-error", "run", "supervisor"],
)
def test_a_handler_set_outside_python_is_given_back_as_the_default(argv, ended, tmp_path):
    (tmp_path / "f.py").write_text("raise SystemExit(3)\n")
    done = run_python(C_HANDLER, *argv, cwd=tmp_path, text=True)
    assert (done.returncode, done.stdout.strip()) == (-signal.SIGTERM, ended), done.stderr[-800:]
