"""The counts a job's manifest gives, read as the API server reads them (part of
:func:`distconv.deploy.check.manifest_problems`): an MPIJob's ``slotsPerWorker`` and replicas, a
StatefulSet's replicas, a Job's completions and parallelism.

Each is an integer field: ``"2"``, ``1.5`` or ``true`` is refused by ``kubectl apply`` (``2.0``
is not: kubectl sends it as ``2``), and the checks that count ranks or slots (``int("2")`` is 2,
``int(True)`` is 1, ``int(None)`` raises) would judge a job that never starts, or stop with a
traceback. :func:`count` reads one such field
as the checks use it, :func:`known_count` where a check compares with it (none where it is no
integer); :func:`count_problems` names each one that is no integer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from distconv.deploy.walk import Manifest, _where, spec_of

#: the largest count the API server takes: each count field is an int32 (``replicas:
#: 3000000000`` is refused as a value out of range, however it is written)
MAX_COUNT = 2**31 - 1

#: the most names (shards, pods) a line shows, the rest counted
#: (:func:`~distconv.short_lists.short_list`): 200000 shards, or as many pods, made a line of
#: megabytes
MAX_NAMED = 5


#: the most pods of a StatefulSet whose placement is each judged; of more, a sample is
#: (:func:`judged_pods`)
JUDGED_ALL = 1000


def judged_pods(first: int, replicas: int) -> Sequence[int]:
    """The pods (by index, ordinal ``first`` + index) of ``replicas`` whose rank's placement by
    host name is judged: each of up to :data:`JUDGED_ALL`, else the first :data:`MAX_NAMED` + 1,
    the last, and the first two and the last of each run of ordinals of as many digits
    (``replicas: 100000000``, each pod judged, was minutes, and past the memory listed). That
    is enough: the pods share one env, so a pod's placement differs from another's only by the
    ordinal its host name ends in, and the host names of a run of ordinals of as many digits
    are cut to 63 characters at one place (``pod_hostname``), so across the run a rank is its
    ordinal (right at both ends of the run, so between them) or a prefix of it, which the
    run's first two pods share."""
    if replicas <= JUDGED_ALL:
        return range(replicas)
    runs = (10**digits - first for digits in range(1, 11))  # an ordinal is below 2**32
    picked = {*range(MAX_NAMED + 1), replicas - 1}
    picked.update(start + step for start in runs for step in (-1, 0, 1))
    return sorted(index for index in picked if 0 <= index < replicas)


def count(spec: Manifest, field: str, default: int) -> int:
    """``spec[field]`` where it is an integer (not a bool, which YAML's ``true`` gives) an int32
    holds, else ``default`` (also where it is absent): a field of another type, or past
    :data:`MAX_COUNT`, is named by :func:`count_problems`; the other checks read the default
    instead of stopping, or of echoing it (``ranks listen on 8080-100000000000000000000008079``)."""
    value = spec.get(field, default)
    return int(value) if _is_int32_count(value) else default


def known_count(spec: Manifest, field: str, default: int | None) -> int | None:
    """``spec[field]`` where it is an integer (``2.0`` as 2) an int32 holds, ``default`` where
    it is absent, None where it is neither: :func:`count_problems` names that one, and a check
    that compares a flag or a list of names with the count judges nothing by it (one problem,
    not its echoes)."""
    if field not in spec:
        return default
    return int(spec[field]) if _is_int32_count(spec[field]) else None


def counted(spec: Manifest, field: str) -> bool:
    """Whether ``spec[field]`` is absent (its default applies) or an integer an int32 holds: a
    check that compares with the count judges nothing where it is not."""
    return field not in spec or _is_int32_count(spec[field])


def _is_int32_count(value: Any) -> bool:
    """Whether ``value`` is an integer (:func:`_is_count`) the API server takes, not above
    :data:`MAX_COUNT`; one past it is named once by :func:`count_problems`, not echoed."""
    return _is_count(value) and value <= MAX_COUNT


def _is_count(value: Any) -> bool:
    """Whether the API server gets an integer from ``value``: an int, or a float with no
    fraction (YAML's ``2.0``), which kubectl sends as ``2`` (sigs.k8s.io/yaml turns the YAML
    into JSON with Go's json.Marshal, which writes float64 2 so, below 1e21)."""
    if isinstance(value, float):
        return value.is_integer() and abs(value) < 1e21
    return isinstance(value, int) and not isinstance(value, bool)


def _count_fields(obj: Manifest) -> Iterator[tuple[str, Manifest, str, int]]:
    """(where, spec, field, least) for each count field ``obj``'s kind has; a StatefulSet's
    ``spec.ordinals.start`` is one too (the checks read it with :func:`known_count`)."""
    spec = spec_of(obj)
    kind = obj.get("kind")
    if kind == "MPIJob":
        yield _where(obj), spec, "slotsPerWorker", 1
        for role, replica in spec.get("mpiReplicaSpecs", {}).items():
            yield f"{_where(obj)} {role}", replica, "replicas", 0
    elif kind == "StatefulSet":
        yield _where(obj), spec, "replicas", 0
        ordinals = spec.get("ordinals")
        if isinstance(ordinals, dict):  # spec.ordinals.start: the first pod's ordinal, an int32
            yield f"{_where(obj)} spec.ordinals", ordinals, "start", 0
    elif kind == "Job":
        yield _where(obj), spec, "completions", 0
        yield _where(obj), spec, "parallelism", 0


def count_problems(objs: Sequence[Manifest]) -> Iterator[str]:
    """Each count field present that is no integer, or below what the API server takes
    (``slotsPerWorker`` of 0 gives no rank a slot; a negative number of replicas), or above
    (:data:`MAX_COUNT`)."""
    for obj in objs:
        for where, spec, field, least in _count_fields(obj):
            if field not in spec:
                continue
            value = spec[field]
            if not _is_count(value) or value < least:
                yield f"{where}: {field} must be an integer >= {least}, got {value!r}"
            elif value > MAX_COUNT:
                yield f"{where}: {field} must be at most {MAX_COUNT} (an int32), got {value!r}"


#: a quantity as the API server reads it (resource.Quantity's parseQuantityString): a sign, a
#: number whose digits may be missing (``"+"`` and ``"."`` are 0), then a decimal exponent or an
#: SI or binary multiplier (``2``, ``-0``, ``2.0``, ``2000m``, ``1e+1``, ``1Ki``)
_QUANTITY = re.compile(
    r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?"
)
#: what Go's strings.TrimSpace, which Quantity.UnmarshalJSON applies first, takes off an ASCII
#: value (and NEL, NBSP)
_GO_SPACE = " \t\n\v\f\r\x85\xa0"
#: the largest decimal exponent read (``1e999``); a larger one is named, not computed
_MOST_EXPONENT = 999
#: what each multiplier of :data:`_QUANTITY` multiplies by
_MULTIPLIERS = {
    **{
        si: Fraction(1000) ** power
        for si, power in zip("numkMGTPE", (-3, -2, -1, 1, 2, 3, 4, 5, 6))
    },
    **{f"{binary}i": Fraction(1024) ** power for power, binary in enumerate("KMGTPE", 1)},
}


def quantity_amount(value: Any) -> Fraction | None:
    """``value``, a resource quantity (``2``, ``1.5``, ``"500m"``, ``"1Ki"``, ``"1e3"``), as the
    exact amount the API server reads (resource.Quantity), its sign kept and not yet rounded:
    an integer, a float (YAML's ``1.5``, which kubectl sends as that JSON number) or a
    quantity's text. None where it is none (``"x"``, ``"1.5 CPUs"``), which the API server
    refuses, or its exponent is past :data:`_MOST_EXPONENT`. A number of any length (``"1e"``
    then 5000 zeros is 1, an int of 5000 digits) is read whole, never through ``int(str)``,
    which refuses more than 4300 digits."""
    if _is_count(value):
        return Fraction(int(value))
    if isinstance(value, float):
        return Fraction(Decimal(repr(value))) if math.isfinite(value) else None
    text = value.strip(_GO_SPACE) if isinstance(value, str) else ""
    match = _QUANTITY.fullmatch(text) if text.isascii() else None
    if not text or match is None:
        return None
    sign, whole, fraction, exponent, multiplier = match.groups()
    power = Decimal(exponent or 0)
    if abs(power) > _MOST_EXPONENT:
        return None
    amount = (
        Fraction(Decimal(f"{whole or 0}.{fraction or 0}"))
        * Fraction(10) ** int(power)
        * _MULTIPLIERS.get(multiplier, 1)
    )
    return -amount if sign == "-" else amount


def whole_quantity(value: Any) -> int | None:
    """``value``, a count of devices (``nvidia.com/gpu``), as the API server reads it: a whole
    number of them, not below 0 (``ValidateResourceQuantityValue``: ``MilliValue() % 1000 ==
    0``, rounded up: ``"0.9995"`` is 1), written as an integer, a whole float or a quantity's
    text (``"2"``, ``"2000m"``, ``" 1"``); None where it is none (``"x"``, ``1.5``, ``-1``),
    which it refuses."""
    amount = quantity_amount(value)
    if amount is None or amount < 0:
        return None
    # the API server validates ceil(value * 1000) (MilliValue; ParseQuantity's rounding up to
    # nano-units is finer), and the count is its Value(), ceil(value)
    milli = math.ceil(amount * 1000)
    return None if milli % 1000 else milli // 1000


def cpu_amount(value: Any) -> Fraction | None:
    """A CPU quantity (``2``, ``1.5``, ``"500m"``, ``"2000m"``, ``"1e0"``) as the CPUs it
    names, as the API server reads it (rounded up to a milli-CPU); None where it is absent,
    below 0, or no quantity (the API server refuses it: not judged)."""
    amount = quantity_amount(value)
    if amount is None or amount < 0:
        return None
    return Fraction(math.ceil(amount * 1000), 1000)
