"""``copied``: a frozen dataclass record with some fields changed, as ``dataclasses.replace`` makes it but
without running ``__init__`` again. Every fire copies a Job and an Execution this way (its job's advance,
its execution's finish), where ``replace``'s rebuild of each field through ``__init__`` is a cost each
fire pays (``bench/records.py`` measures both). Only for records whose ``__init__`` checks and derives
nothing: a class with a ``__post_init__`` goes through ``replace``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, TypeVar

R = TypeVar("R")
_FIELD_NAMES: dict[type, frozenset[str] | None] = {}  # per class; None: it has a __post_init__


def copied(record: R, changes: Mapping[str, Any]) -> R:
    """A copy of ``record`` with ``changes`` over its fields; a name that is not a field raises TypeError."""
    kind = type(record)
    if kind not in _FIELD_NAMES:
        checked = hasattr(kind, "__post_init__")
        _FIELD_NAMES[kind] = None if checked else frozenset(f.name for f in fields(kind))  # type: ignore[arg-type]
    names = _FIELD_NAMES[kind]
    if names is None:
        return replace(record, **changes)  # type: ignore[type-var]
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {', '.join(sorted(unknown))}")
    copy = object.__new__(kind)
    copy.__dict__.update(record.__dict__, **changes)
    return copy
