"""Whether manifest text YAML cannot read is a Go template (a Helm chart's), which is no
manifest until rendered: YAML's error alone (``found unhashable key`` at ``name: {{ .Values.name
}}``) does not say so. A ``{{`` that YAML reads as text (in a quoted string, a comment, a block
scalar: a shell's ``'{{.Names}}'``, Alertmanager's templates in a ConfigMap) makes no template
of a plain manifest, and its error no template's.
"""

from __future__ import annotations

import re

#: a quoted string on one line: '...' ('' is a quote in it), "..." (\" is one), opened where a
#: value starts (after a space, [, { or ,): the ' of a plain ``don't`` opens none
_QUOTED = re.compile(r"""(?<![^\s\[{,])(?:'(?:[^']|'')*'|"(?:[^"\\]|\\.)*")""")
#: a comment: a # at the start or after a space
_COMMENT = re.compile(r"(?:^|\s)#.*")
#: what ends the line that opens a block scalar: | or >, its indicators (|-, >+2)
_BLOCK_START = re.compile(r"(?:^|[\s:-])[|>][0-9+-]*$")


def looks_like_template(text: str) -> bool:
    """Whether ``text`` holds a ``{{`` that YAML reads as YAML: out of quotes, comments and
    the lines of a block scalar (each line more indented than the one that opened it)."""
    block_indent = None  # the indentation of the line that opened a block scalar
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None and (not line.strip() or indent > block_indent):
            continue  # the block scalar's text
        block_indent = None
        bare = _COMMENT.sub("", _QUOTED.sub("''", line)).rstrip()
        if "{{" in bare:
            return True
        if _BLOCK_START.search(bare):
            block_indent = indent
    return False


def template_hint(text: str) -> str:
    """What to add to a YAML error in ``text`` where it looks like a template."""
    if not looks_like_template(text):
        return ""
    return " (a template? check what it renders: helm template ... | distconv check-manifests -)"
