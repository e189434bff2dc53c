"""Deployment: Kubernetes manifests for a job, rendered as dicts and written as YAML.

``distconv-launch k8s`` calls :func:`render_manifests`; ``python -m distconv.deploy k8s`` writes
the checked-in examples. :func:`manifest_problems` holds the checks no schema makes.
"""

from distconv.deploy.check import manifest_problems
from distconv.deploy.render import dump_yaml, render_manifests, write_manifests

__all__ = ["dump_yaml", "manifest_problems", "render_manifests", "write_manifests"]
