"""A name with a dot is no module of ``distconv.deploy``: getattr says AttributeError for it,
as for any name the package lacks, and imports nothing while looking."""

from __future__ import annotations

import pytest

from tests.deploy.test_deploy_package_modules import run_fresh

pytestmark = pytest.mark.timeout(120)


def test_a_dotted_name_is_an_attribute_error_and_imports_nothing():
    """``getattr(d, "walk.x", None)`` is None: no ModuleNotFoundError from looking for a
    module ``distconv.deploy.walk.x``, and ``walk`` is not imported by the look."""
    done = run_fresh(
        "import sys\nimport distconv.deploy as d\n"
        "print([getattr(d, n, None) for n in ('walk.x', 'no.such', '.walk')])\n"
        "print('distconv.deploy.walk' in sys.modules)\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "[None, None, None]\nFalse\n", "")
