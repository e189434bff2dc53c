"""The deploy tests' name for :mod:`tests.child_env`, which every test that starts a child
importing this checkout uses."""

from tests.child_env import REPO_ROOT, child_env, child_path

__all__ = ["REPO_ROOT", "child_env", "child_path"]
