"""Reading a manifest file's text into its documents, as ``distconv check-manifests`` does
(:mod:`distconv.deploy.check_command`, which reads the files and names them in its messages).

JSON where the text is JSON (a stream of documents, as kubectl reads one), else YAML through
the safe loader alone; each document with the line it starts on, refused in one line where it
cannot be read (too deep, a bad value, a control character) or is no object the checks can
read (:func:`_refuse_shape`). A reader runs in a raised recursion limit, one at a time.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import yaml

from distconv.deploy.bounds import (
    MAX_DEPTH,
    decode_json,
    json_depth_problem,
    room_to_nest,
    shape_problem,
    yaml_depth_problem,
)
from distconv.deploy.manifest_text import ManifestReadError, unprintable_at, yaml_error
from distconv.deploy.templates import template_hint
from distconv.deploy.yaml_loader import Loader as _Loader
from distconv.deploy.yaml_loader import PyLoader as _PyLoader

#: held while a reader runs in the raised recursion limit, which is the process's: two threads
#: each raising it and restoring what they found left one reading in the limit the other had
#: restored (its deep document refused) and the other's raised limit set for good
_ONE_READER_AT_A_TIME = threading.Lock()
#: what JSON takes for white space between documents (not str.isspace's)
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _looks_json(text: str) -> bool:
    """Whether ``text`` starts as JSON does: ``{`` (apimachinery's ``IsJSONBuffer``), or ``[``,
    a list, which the check refuses however it is read."""
    return text.lstrip()[:1] in ("{", "[")


def _maybe_json(text: str) -> list[tuple[int, Any]] | None:
    """The JSON documents ``text`` is, if it is JSON."""
    if not _looks_json(text):
        return None
    try:
        return _json_documents(text)
    except ManifestReadError:
        return None


def _json_documents(text: str) -> list[tuple[int, Any]]:
    """The JSON documents of ``text``, one after another as kubectl reads a stream of them (none
    if blank), each with the line it starts on."""
    docs, end, line = [], 0, 1
    if too_deep := json_depth_problem(text):
        raise ManifestReadError(too_deep)
    try:
        with _ONE_READER_AT_A_TIME, room_to_nest():
            while (start := _JSON_SPACE.match(text, end).end()) < len(text):
                line += text.count("\n", end, start)  # counted on from the last, not from 0
                doc, end = decode_json(text, start)
                docs.append((line, doc))
                line += text.count("\n", start, end)
    except json.JSONDecodeError as exc:
        message = exc.msg[:1].lower() + exc.msg[1:]
        raise ManifestReadError(f"line {exc.lineno}, column {exc.colno}: {message}") from None
    except (ValueError, RecursionError) as exc:  # an integer of 5000 digits; [[[[...
        raise ManifestReadError(_brief(exc, len(docs))) from None
    return docs


def _yaml_documents(text: str) -> list[tuple[int, Any]]:
    """Each YAML document of ``text`` with the line it starts on. Only the safe loader: a tag
    such as ``!!python/object`` is an error, never an object built."""
    docs: list[tuple[int, Any]] = []
    loader = None
    try:
        too_deep, loader_class = yaml_depth_problem(text, (_Loader, _PyLoader))
        if too_deep:
            raise ManifestReadError(too_deep)
        loader = loader_class(text)
        with _ONE_READER_AT_A_TIME, room_to_nest():
            while loader.check_node():
                node = loader.get_node()
                docs.append((node.start_mark.line + 1, loader.construct_document(node)))
    except yaml.MarkedYAMLError as exc:
        raise ManifestReadError(yaml_error(exc) + template_hint(text)) from None
    except yaml.reader.ReaderError as exc:  # a control character
        raise ManifestReadError(unprintable_at(text, exc)) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # a date 2024-13-01
        raise ManifestReadError(_brief(exc, len(docs))) from None
    finally:
        if loader is not None:
            loader.dispose()
    return docs


def _brief(exc: BaseException, documents_read: int) -> str:
    """``exc`` in one line, after the document where it arose."""
    where = f"document {documents_read + 1}: " if documents_read else ""
    if isinstance(exc, RecursionError):
        return f"{where}nested deeper than the {MAX_DEPTH} levels the check reads"
    return where + (" ".join(str(exc).split()) or type(exc).__name__)


def _refuse_shape(doc: Any, where: str) -> None:
    """Refuse a document that is no mapping (nor empty), or that the checks cannot read
    (:func:`~distconv.deploy.bounds.shape_problem`: it holds itself, nests too deep, or holds
    too many values its aliases add once expanded)."""
    if doc is not None and not isinstance(doc, dict):
        raise ManifestReadError(f"{where} is {_kind_of(doc)}, not an object (kind, metadata, ...)")
    problem = shape_problem(doc)
    if problem:
        raise ManifestReadError(f"{where} {problem}")


def _kind_of(value: Any) -> str:
    """What ``value`` is, in words: ``a list``, ``an integer``."""
    for kind, words in ((bool, "a boolean"), (int, "an integer"), (float, "a number")):
        if isinstance(value, kind):
            return words
    words = {list: "a list", str: "a string", bytes: "binary data"}.get(type(value))
    return words or f"a {type(value).__name__}"
