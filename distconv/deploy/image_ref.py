"""Whether a text is an image reference a kubelet can pull, by the grammar of the kubelet's
parser (github.com/distribution/reference, ParseNormalizedNamed, and the digests of
github.com/opencontainers/go-digest it validates): a pod whose image is none fails with
``InvalidImageName`` and never starts, after the job was applied."""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH}(?:/{_PATH})*)(?::(?P<tag>{_TAG}))?"
    rf"(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
#: the digest algorithms the parser takes, each with its length of lower-case hex (go-digest
#: refuses another algorithm, capitals, or another length)
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
_LOWER_HEX = re.compile(r"[0-9a-f]+")
#: an image ID, which the parser refuses as a name ("cannot specify 64-byte hexadecimal strings")
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
#: the registry a reference that names none pulls from, as the parser names it
DOCKER_HUB = "docker.io"
#: the longest repository path the parser takes
PATH_MAX = 255
#: the form, as the refusal says it
FORM = (
    "[REGISTRY[:PORT]/]REPOSITORY[:TAG][@DIGEST], the repository in lower case, a digest "
    "sha256:, sha384: or sha512: and its lower-case hex"
)


def is_image_reference(text: str) -> bool:
    """Whether ``text`` is an image reference the kubelet can pull: ``Distconv:1`` is not (a
    repository is lower case), nor is one with a space, an empty tag, a tag of other
    characters, a digest other than ``sha256:`` and 64 lower-case hex digits (or sha384's 96,
    sha512's 128), a bare image ID (64 hex digits) or a repository path over 255 characters."""
    match = _REFERENCE.fullmatch(text)
    if match is None or _IDENTIFIER.fullmatch(text):
        return False
    digest = match["digest"]
    if digest is not None:
        algorithm, _, hex_digits = digest.partition(":")
        if len(hex_digits) != DIGEST_HEX.get(algorithm) or not _LOWER_HEX.fullmatch(hex_digits):
            return False
    return len(_repository_path(match["domain"], match["path"])) <= PATH_MAX


def _repository_path(domain: str | None, path: str) -> str:
    """The repository path the parser measures: without the registry, as it splits one off
    (a first component with a dot or a colon, ``localhost``, or capitals), and on Docker Hub
    with ``library/`` before a one-component name."""
    return _normalized_name(domain, path)[1]


def _normalized_name(domain: str | None, path: str) -> tuple[str, str]:
    """(registry, repository path) as the parser normalises them (ParseNormalizedNamed): a
    first component that is no registry belongs to the path, on Docker Hub, whose legacy name
    ``index.docker.io`` is ``docker.io``; there a one-component path is under ``library/``."""
    if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
        if domain.lower() == domain:  # a lower-case first component is the path's, on Docker Hub
            path, domain = f"{domain}/{path}", None
    domain = DOCKER_HUB if domain in (None, "index.docker.io") else domain
    if domain == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return domain, path


def pulled_image(text: str) -> str | None:
    """The image the kubelet pulls for the reference ``text``, written one way for every way
    of writing it: ``distconv``, ``distconv:latest`` and ``docker.io/library/distconv:latest``
    are one image, and so are ``x:1@sha256:D`` and ``x@sha256:D`` (a digest is pulled, its tag
    ignored); None where ``text`` is no image reference. Two tags of one repository stay two:
    whether they name one build only the registry knows."""
    match = _REFERENCE.fullmatch(text) if is_image_reference(text) else None
    if match is None:
        return None
    domain, path = _normalized_name(match["domain"], match["path"])
    pinned = f"@{match['digest']}" if match["digest"] else f":{match['tag'] or 'latest'}"
    return f"{domain}/{path}{pinned}"
