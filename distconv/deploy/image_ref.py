"""Whether a text is an image reference a kubelet can pull, by the grammar of the kubelet's
parser (github.com/distribution/reference, ParseNormalizedNamed): a pod whose image is none
fails with ``InvalidImageName`` and never starts, after the job was applied."""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?:{_DOMAIN}/)?{_PATH}(?:/{_PATH})*(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII
)
#: the form, as the refusal says it
FORM = "[REGISTRY[:PORT]/]REPOSITORY[:TAG][@DIGEST], the repository in lower case"


def is_image_reference(text: str) -> bool:
    """Whether ``text`` is an image reference the kubelet can pull: ``Distconv:1`` is not (a
    repository is lower case), nor is one with a space, an empty tag, or a tag or digest of
    other characters."""
    return _REFERENCE.fullmatch(text) is not None
