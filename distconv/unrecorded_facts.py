"""The facts a checkpoint of an older distconv does not record, which a resume therefore does
not compare with the run's, and the one warning that says so (:func:`warn_of_unrecorded`).

Each facts form (:data:`~distconv.resume_facts.FACTS_FORMS`) records more: a checkpoint
written before the sync scheme was recorded holds none, nor the network's layers nor the world
size, and one older still no training-set fingerprint. A resume compares only what both sides
record, so a model changed from tanh to relu since such a checkpoint resumed without a word,
where the same change on a checkpoint of this distconv is refused. The first resume after an
upgrade is the one an operator most relies on the checks for, so it says which were skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from distconv.resume_facts import (
    FACTS_FORM,
    FACTS_FORM_KEY,
    FACTS_FORMS,
    MUST_MATCH,
    UNKNOWN,
    recorded,
)
from distconv.scheme_history import WORLD_SIZE, is_asynchronous, is_scheme

log = logging.getLogger("distconv.resume")

#: each fact a resume compares (:data:`~distconv.resume_facts.MUST_MATCH`) or warns of (the
#: world size, the sync scheme), as the warning names it, in the order it lists them
NAMES = {
    "seed": "seed",
    "global_batch": "global batch",
    "optimizer": "optimizer",
    "lr_decay": "learning-rate decay",
    "dtype": "dtype",
    "data": "data set",
    "model": "model",
    "train_data": "training set's fingerprint",
    "layers": "layers",
    WORLD_SIZE: "world size",
    "scheme": "sync scheme",
}


def unrecorded(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """The facts (:data:`NAMES`' keys, in its order) that this run records (``ours``, as
    :func:`~distconv.resume_facts.check_same_run` takes them) and the checkpoint whose
    ``extra``, seed and optimizer ``theirs`` holds does not: a fact of
    :data:`~distconv.resume_facts.MUST_MATCH` it lacks or holds as unknown (a ``dtype`` of
    ``"None"``), or one it holds only as a config's own key of that name
    (:func:`~distconv.resume_facts.recorded`), and the world size and sync scheme, which every
    run has. The world size only where the checkpoint's scheme is asynchronous or unrecorded:
    under a synchronous one a resume compares no world size
    (:func:`~distconv.scheme_history.other_world`), so lacking it loses no check."""
    missing = [
        k for k in MUST_MATCH if recorded(theirs, k) in UNKNOWN and ours.get(k) not in UNKNOWN
    ]
    scheme = theirs.get("scheme")
    compared = is_asynchronous(scheme) or not is_scheme(scheme)  # other_world's "then"
    if compared and type(recorded(theirs, WORLD_SIZE)) is not int:
        missing.append(WORLD_SIZE)
    if not is_scheme(theirs.get("scheme")):
        missing.append("scheme")
    return missing


def warn_of_unrecorded(path: Any, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> None:
    """Warn once, as the chief resumes the checkpoint at ``path``, where it is of an older
    facts form than this distconv writes (its ``facts_form`` older than
    :data:`~distconv.resume_facts.FACTS_FORM`, or none) and so records fewer facts: ``checkpoint
    ... was written by an older distconv: it records no layers, world size, sync scheme; these
    are not compared ...`` (:func:`unrecorded`). A form this distconv does not know is said to
    be another distconv's (a later one, which records those facts in a form this one does not
    read: ``this distconv does not read its layers``). Nothing is said of a checkpoint of this
    distconv's form."""
    form = theirs.get(FACTS_FORM_KEY)
    if form == FACTS_FORM or not (missing := unrecorded(theirs, ours)):
        return
    later = isinstance(form, str) and form.startswith("distconv: ") and form not in FACTS_FORMS
    names = ", ".join(NAMES[k] for k in missing)
    if later:  # it records them, in its own form
        writer, lacks = f"another distconv (facts form {form!r}, unknown here)", "this distconv "
        lacks += f"does not read its {names}"
    else:
        writer, lacks = "an older distconv", f"it records no {names}"
    log.warning(
        "checkpoint %s was written by %s: %s; these are not compared with this run's, so a "
        "change in them since the checkpoint resumes without a refusal or a warning",
        path,
        writer,
        lacks,
    )
