"""Alert rules: normalise, then evaluate. Pure functions, no I/O.

The rules are written by another backend and a web UI, and the part values come from several upstream
pipelines, so "10" and 10.0, Low and LOW, yes and YES all arrive. Every current value, baseline and
threshold is put into one canonical form per field before any operator runs (``normalise``); a value
that cannot be is an error on that rule alone.

Five rule types, seven operators (eq, ne, gt, gte, lt, lte, changed):

=============  ===============================  ===================================================
type           the value compared                canonical form
=============  ===============================  ===================================================
price_change   |current - baseline| / baseline,  float (a price: "1,234.50", "$3", 3 -> 3.0; the
               in percent (the baseline is the   threshold is a percentage: "10", "10%" -> 10.0)
               price when the rule last fired)
risk           the part's risk score, or its     float for a score; for a level, title case from
               risk level when the threshold is  Low < Medium < High < Critical
               a level name
compliance     one compliance flag of the part   upper case ("yes", True -> "YES"; "no", False ->
               (the rule's ``flag``, rohs by     "NO"); only eq, ne, changed
               default)
lifecycle      the part's lifecycle stage        one of PREVIEW < ACTIVE < NRND < LTB < EOL <
                                                 OBSOLETE (aliases below)
alternate      the alternates that appeared      a set of upper-case part numbers; the threshold is
               since the last check              a count (gt 0: any new one) or a part number (eq:
                                                 that one appeared)
=============  ===============================  ===================================================

When a rule fires (``evaluate``): the condition holds now, it is a change since the rule's cursor (the
canonical value it saw at its last check), and the rule is outside its cooldown since it last fired.
"A change" means, for price_change, a price different from the cursor's; for a comparison on a level
(risk, compliance, lifecycle), crossing into the condition - it held now and not at the cursor; for
``changed``, a value different from the cursor's; for alternate, new members. So evaluating the same
state twice fires nothing twice, and neither does a stale read: the caller keys each notification by the
cursor's version, which every change increments.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any


class RuleType(enum.StrEnum):
    PRICE_CHANGE = "price_change"
    RISK = "risk"
    COMPLIANCE = "compliance"
    LIFECYCLE = "lifecycle"
    ALTERNATE = "alternate"


class Operator(enum.StrEnum):
    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    CHANGED = "changed"


class RuleError(ValueError):
    """A rule that cannot be evaluated: recorded on the rule, never stops the scan."""


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "", text).lower()


_TYPE_ALIASES: dict[str, RuleType] = {
    **{_key(t.value): t for t in RuleType},
    "pricechange": RuleType.PRICE_CHANGE,
    "price": RuleType.PRICE_CHANGE,
    "riskscore": RuleType.RISK,
    "risklevel": RuleType.RISK,
    "compliancechange": RuleType.COMPLIANCE,
    "complianceflag": RuleType.COMPLIANCE,
    "lifecyclestage": RuleType.LIFECYCLE,
    "lifecyclechange": RuleType.LIFECYCLE,
    "alternates": RuleType.ALTERNATE,
    "newalternate": RuleType.ALTERNATE,
    "alternatepart": RuleType.ALTERNATE,
}

_OPERATOR_ALIASES: dict[str, Operator] = {
    **{o.value: o for o in Operator},
    "=": Operator.EQ,
    "==": Operator.EQ,
    "equals": Operator.EQ,
    "!=": Operator.NE,
    "<>": Operator.NE,
    "notequals": Operator.NE,
    ">": Operator.GT,
    ">=": Operator.GTE,
    "<": Operator.LT,
    "<=": Operator.LTE,
    "change": Operator.CHANGED,
    "haschanged": Operator.CHANGED,
}

RISK_LEVELS = ("Low", "Medium", "High", "Critical")
_RISK_ALIASES = {"low": "Low", "medium": "Medium", "med": "Medium", "high": "High", "critical": "Critical"}

LIFECYCLE_STAGES = ("PREVIEW", "ACTIVE", "NRND", "LTB", "EOL", "OBSOLETE")
_LIFECYCLE_ALIASES = {
    "preview": "PREVIEW",
    "introduction": "PREVIEW",
    "new": "PREVIEW",
    "active": "ACTIVE",
    "production": "ACTIVE",
    "inproduction": "ACTIVE",
    "nrnd": "NRND",
    "notrecommendedfornewdesigns": "NRND",
    "notrecommended": "NRND",
    "ltb": "LTB",
    "lasttimebuy": "LTB",
    "eol": "EOL",
    "endoflife": "EOL",
    "obsolete": "OBSOLETE",
    "discontinued": "OBSOLETE",
}

_TRUE = {"yes", "y", "true", "t", "1", "compliant", "pass"}
_FALSE = {"no", "n", "false", "f", "0", "noncompliant", "notcompliant", "fail"}


# -- normalisation -----------------------------------------------------------------------------------------
def rule_type(raw: Any) -> RuleType:
    found = _TYPE_ALIASES.get(_key(str(raw))) if isinstance(raw, str) else None
    if found is None:
        raise RuleError(f"unknown rule type {raw!r}; expected one of {', '.join(t.value for t in RuleType)}")
    return found


def operator(raw: Any) -> Operator:
    found = _OPERATOR_ALIASES.get(_key(str(raw))) if isinstance(raw, str) else None
    if found is None:
        raise RuleError(f"unknown operator {raw!r}; expected one of {', '.join(o.value for o in Operator)}")
    return found


def number(raw: Any, what: str) -> float:
    """A float from 3, 3.5, "3", " 1,234.50 ", "$3", "10%"; not from booleans, NaN or infinities."""
    value: float
    if isinstance(raw, bool) or raw is None:
        raise RuleError(f"{what} {raw!r} is not a number")
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        text = raw.strip().replace(",", "").replace("_", "")
        text = text.removeprefix("$").removeprefix("€").removeprefix("£").removesuffix("%").strip()
        try:
            value = float(text)
        except ValueError:
            raise RuleError(f"{what} {raw!r} is not a number") from None
    else:
        raise RuleError(f"{what} {raw!r} is not a number")
    if not math.isfinite(value):
        raise RuleError(f"{what} {raw!r} is not a finite number")
    return value


def risk_level(raw: Any, what: str = "risk level") -> str:
    found = _RISK_ALIASES.get(_key(raw)) if isinstance(raw, str) else None
    if found is None:
        raise RuleError(f"{what} {raw!r} is not one of {', '.join(RISK_LEVELS)}")
    return found


def compliance_flag(raw: Any, what: str = "compliance flag") -> str:
    if isinstance(raw, bool):
        return "YES" if raw else "NO"
    if isinstance(raw, str) and raw.strip():
        key = _key(raw)
        if key in _TRUE:
            return "YES"
        if key in _FALSE:
            return "NO"
        return raw.strip().upper()
    raise RuleError(f"{what} {raw!r} is not a flag")


def lifecycle_stage(raw: Any, what: str = "lifecycle stage") -> str:
    found = _LIFECYCLE_ALIASES.get(_key(raw)) if isinstance(raw, str) else None
    if found is None:
        raise RuleError(f"{what} {raw!r} is not one of {', '.join(LIFECYCLE_STAGES)}")
    return found


def part_numbers(raw: Any, what: str = "alternates") -> frozenset[str]:
    """A set of upper-case part numbers from a list, or a comma-separated string; None is empty."""
    if raw is None:
        return frozenset()
    items: Iterable[Any]
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, list | tuple | set | frozenset):
        items = raw
    else:
        raise RuleError(f"{what} {raw!r} is not a list of part numbers")
    parts = set()
    for item in items:
        if isinstance(item, Mapping):  # {"mpn": "..."} as some pipelines send
            item = item.get("mpn") or item.get("partNumber") or item.get("id")
        if not isinstance(item, str | int) or isinstance(item, bool):
            raise RuleError(f"{what} {raw!r} holds {item!r}, not a part number")
        text = str(item).strip().upper()
        if text:
            parts.add(text)
    return frozenset(parts)


# -- rules and their state ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cursor:
    """What a rule saw at its last check: the canonical value, and a version bumped on every change."""

    value: Any
    version: int = 0


@dataclass(frozen=True)
class Rule:
    """One rule of an alert document, as stored (raw fields) plus its state."""

    id: str
    type: Any
    operator: Any
    threshold: Any = None
    flag: str = "rohs"  # compliance: which flag of the part
    active: bool = True
    cooldown: timedelta = timedelta(hours=1)
    email: bool = False
    baseline: Any = None  # price_change: the price it is measured from (set when the rule fires)
    cursor: Cursor | None = None
    last_checked_at: datetime | None = None
    last_triggered_at: datetime | None = None

    def due(self, now: datetime) -> bool:
        """Never checked, or last checked at least a cooldown ago."""
        return self.active and (self.last_checked_at is None or now - self.last_checked_at >= self.cooldown)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one evaluation: what to write back, and whether (and why) the rule fired."""

    rule_id: str
    checked_at: datetime
    cursor: Cursor | None
    baseline: Any = None
    triggered: bool = False
    message: str = ""
    error: str | None = None
    previous_version: int | None = None  # the cursor version this verdict was computed from
    details: dict[str, Any] = field(default_factory=dict)


Compare = Callable[[Any, Any], bool]
_ORDERED: dict[Operator, Compare] = {
    Operator.EQ: lambda a, b: bool(a == b),
    Operator.NE: lambda a, b: bool(a != b),
    Operator.GT: lambda a, b: bool(a > b),
    Operator.GTE: lambda a, b: bool(a >= b),
    Operator.LT: lambda a, b: bool(a < b),
    Operator.LTE: lambda a, b: bool(a <= b),
}


def current_value(kind: RuleType, rule: Rule, part: Mapping[str, Any]) -> Any:
    """The part's canonical value for a rule of ``kind``. Raises ``RuleError`` if it has none."""

    def field_of(*names: str) -> Any:
        for name in names:
            if part.get(name) is not None:
                return part[name]
        raise RuleError(f"part {part.get('_id', part.get('id', '?'))!r} has no {names[0]}")

    if kind is RuleType.PRICE_CHANGE:
        return number(field_of("price", "unitPrice", "unit_price"), "price")
    if kind is RuleType.RISK:
        if _is_level(rule.threshold):
            return risk_level(field_of("riskLevel", "risk_level"))
        return number(field_of("riskScore", "risk_score"), "risk score")
    if kind is RuleType.COMPLIANCE:
        flags = field_of("compliance")
        if not isinstance(flags, Mapping):
            raise RuleError(f"compliance {flags!r} is not a map of flags")
        wanted = _key(rule.flag or "rohs")
        for name, value in flags.items():
            if _key(str(name)) == wanted:
                return compliance_flag(value)
        raise RuleError(f"part has no compliance flag {rule.flag!r}")
    if kind is RuleType.LIFECYCLE:
        return lifecycle_stage(field_of("lifecycle", "lifecycleStage", "lifecycle_stage"))
    return part_numbers(part.get("alternates"))


def _is_level(raw: Any) -> bool:
    return isinstance(raw, str) and _key(raw) in _RISK_ALIASES


def threshold_for(kind: RuleType, op: Operator, raw: Any) -> Any:
    """The canonical threshold of a rule; None for ``changed`` (which needs none)."""
    if op is Operator.CHANGED:
        return None
    if raw is None:
        raise RuleError(f"operator {op.value} needs a threshold")
    if kind is RuleType.PRICE_CHANGE:
        return number(raw, "threshold")
    if kind is RuleType.RISK:
        return risk_level(raw, "threshold") if _is_level(raw) else number(raw, "threshold")
    if kind is RuleType.COMPLIANCE:
        if op not in (Operator.EQ, Operator.NE):
            raise RuleError(f"operator {op.value} does not apply to a compliance flag (eq, ne, changed do)")
        return compliance_flag(raw, "threshold")
    if kind is RuleType.LIFECYCLE:
        return lifecycle_stage(raw, "threshold")
    if isinstance(raw, str) and not _looks_numeric(raw):
        if op not in (Operator.EQ, Operator.NE):
            raise RuleError(f"operator {op.value} needs a count, not the part number {raw!r}")
        return raw.strip().upper()
    return number(raw, "threshold")


def _looks_numeric(text: str) -> bool:
    try:
        number(text, "")
    except RuleError:
        return False
    return True


def _rank(kind: RuleType, value: Any) -> Any:
    """Levels compare by their order, not alphabetically."""
    if kind is RuleType.RISK and isinstance(value, str):
        return RISK_LEVELS.index(value)
    if kind is RuleType.LIFECYCLE:
        return LIFECYCLE_STAGES.index(value)
    return value


def _canonical_cursor(kind: RuleType, rule: Rule) -> Any:
    """The cursor's value in this rule's canonical form (stored, a set comes back as a list); None when it
    has none, or when it cannot be read as this rule's kind (the rule was edited: start afresh)."""
    if rule.cursor is None or rule.cursor.value is None:
        return None
    raw = rule.cursor.value
    try:
        if kind is RuleType.ALTERNATE:
            return part_numbers(raw)
        if kind is RuleType.PRICE_CHANGE:
            return number(raw, "cursor")
        if kind is RuleType.RISK:
            return risk_level(raw) if _is_level(rule.threshold) else number(raw, "cursor")
        if kind is RuleType.COMPLIANCE:
            return compliance_flag(raw)
        return lifecycle_stage(raw)
    except RuleError:
        return None


def stored(value: Any) -> Any:
    """A canonical value as a document field (sets as sorted lists)."""
    return sorted(value) if isinstance(value, frozenset | set) else value


def evaluate(rule: Rule, part: Mapping[str, Any] | None, now: datetime) -> Verdict:
    """Evaluate ``rule`` against ``part`` (its current values) at ``now``."""
    previous = rule.cursor.version if rule.cursor else None
    try:
        kind = rule_type(rule.type)
        op = operator(rule.operator)
        threshold = threshold_for(kind, op, rule.threshold)
        if part is None:
            raise RuleError("no data for the part")
        value = current_value(kind, rule, part)
    except RuleError as exc:
        return Verdict(rule.id, now, rule.cursor, rule.baseline, error=str(exc), previous_version=previous)

    cursor_value = _canonical_cursor(kind, rule)
    changed = rule.cursor is None or cursor_value != value
    cursor = Cursor(value, (rule.cursor.version + 1) if rule.cursor else 0) if changed else rule.cursor
    cooling = rule.last_triggered_at is not None and now - rule.last_triggered_at < rule.cooldown
    baseline = rule.baseline
    fired, message = False, ""
    if kind is RuleType.PRICE_CHANGE:
        try:
            start = number(baseline, "baseline") if baseline is not None else None
        except RuleError as exc:
            return Verdict(rule.id, now, rule.cursor, rule.baseline, error=str(exc), previous_version=previous)
        if start is None:
            baseline = value  # the first price seen is what changes are measured from
        elif changed:  # a first check measures from a baseline the producer set
            if op is Operator.CHANGED:
                fired = value != start
            elif start == 0:
                fired = False
            else:
                pct = abs(value - start) / abs(start) * 100
                fired = _ORDERED[op](round(pct, 9), threshold)
            message = f"price {start:g} -> {value:g} ({(value - start) / start * 100 if start else 0:+.1f}%)"
    elif kind is RuleType.ALTERNATE:
        seen = cursor_value if isinstance(cursor_value, frozenset) else frozenset()
        new = value - seen if rule.cursor is not None else frozenset()
        if rule.cursor is None or not changed:
            fired = False  # the first check only sees what is there; no change, nothing new
        elif op is Operator.CHANGED:
            fired = True
        elif isinstance(threshold, str):
            fired = (threshold in new) if op is Operator.EQ else bool(new - {threshold})
        else:
            fired = _ORDERED[op](len(new), threshold)
        message = f"{len(new)} new alternate(s)" + (f": {', '.join(sorted(new))}" if new else "")
    elif op is Operator.CHANGED:
        fired = rule.cursor is not None and changed
        message = f"{kind.value} {cursor_value} -> {value}"
    else:
        compare = _ORDERED[op]
        try:
            holds = compare(_rank(kind, value), _rank(kind, threshold))
            held = cursor_value is not None and compare(_rank(kind, cursor_value), _rank(kind, threshold))
        except TypeError:
            return Verdict(
                rule.id,
                now,
                rule.cursor,
                rule.baseline,
                error=f"cannot compare {value!r} with {threshold!r}",
                previous_version=previous,
            )
        fired = holds and not held
        message = f"{kind.value} {value} {op.value} {threshold}"
    if fired and cooling:
        fired, message = False, ""
    if fired and kind is RuleType.PRICE_CHANGE:
        baseline = value  # the next change is measured from here
    return Verdict(
        rule.id,
        now,
        cursor,
        baseline,
        triggered=fired,
        message=message if fired else "",
        previous_version=previous,
    )
