"""What ``distconv train`` tells a user about threads and numpy's BLAS: its ``--help`` names
the variable that sets a step's threads (the flags do not, and the usual BLAS variables change
nothing inside a step), and its start log names kernels the environment forces on numpy's
OpenBLAS (``OPENBLAS_CORETYPE``), which ran the default model's step about a fifth slower on a
Zen 5 CPU than its own, where nothing told a training user. Real ``python -m distconv``
processes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.kernels.blas import KERNEL_VARS
from tests.child_env import REPO_ROOT, child_env

#: the epilog's pointer for the rest
SECTION = "Threads and BLAS"


def _distconv(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m distconv ARGS`` with none of :data:`KERNEL_VARS` but those in ``env``."""
    environ = child_env()
    for name in KERNEL_VARS:
        environ.pop(name, None)
    environ.pop("DISTCONV_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "distconv", *args],
        capture_output=True,
        text=True,
        env={**environ, **env},
        timeout=120,
    )


def test_train_help_says_what_sets_a_step_s_threads_and_what_does_not():
    done = _distconv("train", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps the epilog to the terminal
    assert "DISTCONV_NUM_THREADS kernel threads" in text
    assert "distconv-launch --threads" in text
    assert "OMP_NUM_THREADS and OPENBLAS_NUM_THREADS change nothing there" in text
    assert "OPENBLAS_CORETYPE" in text and f'README.md, "{SECTION}"' in text
    # the section it points to is there
    readme = (REPO_ROOT / "README.md").read_text()
    assert re.search(rf"^#+ {SECTION}$", readme, re.MULTILINE), SECTION


def _start_lines(tmp_path: Path, *flags: str, **env: str) -> list[str]:
    """The log lines of a one-epoch ``distconv train FLAGS`` on the synthetic set under ``env``."""
    done = _distconv(
        "train", "--data", "synthetic", "--epochs", "1", "--no-progress",
        "--out", str(tmp_path / "run"), *flags, **env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_the_start_log_names_kernels_the_environment_forces_and_how_to_run_the_cpu_s(tmp_path):
    lines = _start_lines(tmp_path, OPENBLAS_CORETYPE="Haswell")
    said = [i for i, line in enumerate(lines) if "numpy's BLAS: " in line]
    assert len(said) == 1, lines
    line = lines[said[0]]
    forced = "(set by the environment: OPENBLAS_CORETYPE=Haswell; for the CPU's own kernels, run "
    assert forced + "under env -u OPENBLAS_CORETYPE)" in line and "may be slower" in line, line
    assert "training on synthetic" in lines[said[0] - 1]  # beside the run's config


@pytest.mark.parametrize("env", [{}, {"OPENBLAS_L2_SIZE": "512"}, {"OPENBLAS_CORETYPE": ""}])
def test_the_start_log_is_quiet_where_the_kernels_are_the_cpu_s_own(tmp_path, env):
    lines = _start_lines(tmp_path, **env)
    assert any("training on synthetic" in line for line in lines), lines
    assert not any("numpy's BLAS" in line or "OPENBLAS" in line for line in lines), lines


@pytest.mark.gpu
def test_the_start_log_is_quiet_about_the_cpu_s_kernels_on_the_gpu(tmp_path, cupy):
    """On the GPU a step's products run on the device, none on numpy's BLAS: the line that its
    kernels may be slower was noise there."""
    lines = _start_lines(tmp_path, "--device", "gpu", OPENBLAS_CORETYPE="Haswell")
    assert any("training on synthetic" in line for line in lines), lines
    assert not any("numpy's BLAS" in line for line in lines), lines


def _prose(text: str) -> str:
    """``text`` without its code blocks and inline code (commands, log lines, versions), its
    line breaks as spaces."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    return " ".join(re.sub(r"`[^`]*`", " ", text).split())


def _docs_section(name: str, heading: str) -> str:
    """The text of docs/NAME's section whose heading begins with ``heading``, up to the next
    section of its level or above."""
    text = (REPO_ROOT / "docs" / name).read_text(encoding="utf-8")
    found = re.search(rf"^(#+) {re.escape(heading)}", text, re.MULTILINE)
    assert found, f"docs/{name} has no section {heading!r}"
    rest = text[found.end() :]
    end = re.search(rf"^#{{1,{len(found.group(1))}}} ", rest, re.MULTILINE)
    return " ".join(rest[: end.start() if end else None].split())


def test_the_readme_section_quotes_figures_the_benchmark_record_it_cites_holds():
    """The section quoted 26.9 against 22.5 ms, which no benchmark record held: a figure a
    user cannot trace to a command and a run. Every number in its prose is in the section of
    docs/benchmarks.md or docs/benchmarks-history.md it cites."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(rf"^## {SECTION}$(.*?)^## ", readme, re.MULTILINE | re.DOTALL)
    assert section, SECTION
    prose = _prose(section.group(1))
    cited = re.findall(r"\[docs/(benchmarks(?:-history)?\.md)\]\([^)]*\), \"([^\"]+)\"", prose)
    record = " ".join(_docs_section(name, heading) for name, heading in cited)
    figures = re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*\d)", prose)
    assert figures, prose
    missing = [f for f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", record)]
    assert not missing, (missing, cited)
