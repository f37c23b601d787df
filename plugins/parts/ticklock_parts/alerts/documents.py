"""The documents the scanner reads and writes, as another backend writes them.

An **alert** (collection ``alerts``) is written by the product's backend: a user watching a part, with a
list of rules. The scanner reads the fields below and writes back only the state fields of each rule
(``lastCheckedAt``, ``cursor``, ``baseline``, ``lastTriggeredAt``, ``lastError``); every other field of
the document and of each rule is kept as it was::

    {"_id": "a1", "userId": "u1", "partId": "p1", "email": "buyer@example.com",
     "rules": [{"id": "r1", "type": "price_change", "operator": "gt", "threshold": "10",
                "active": true, "cooldownMinutes": 60, "notify": ["email"],
                "baseline": 1.25,                                  # optional, set by the producer
                "cursor": {"value": 1.31, "version": 4},           # state: written by the scanner
                "lastCheckedAt": ISODate(...), "lastTriggeredAt": ISODate(...), "lastError": null}]}

Accepted variants: ``rules`` or ``alertRules``; a rule's id as ``id``, ``ruleId`` or ``_id`` (else its
position); ``active`` as a boolean, "yes"/"no", "true"/"false", 1/0, missing = active; the cooldown as
``cooldownMinutes`` (a number or numeric string) or ``cooldownSeconds``, default 60 minutes; email wanted
when ``notify``/``channels`` lists "email", or ``email``/``notifyEmail``/``sendEmail`` is true-ish; the
address is the alert's ``email`` (or ``userEmail``). The compliance flag a rule watches is ``flag``
(default rohs).

A **part** (collection ``parts``, written by the upstream pipelines and by ``catalogue.spot_prices``)::

    {"_id": "p1", "mpn": "LM358DR", "price": 1.31, "riskScore": 42, "riskLevel": "Medium",
     "compliance": {"rohs": "Yes", "reach": "no"}, "lifecycle": "Active", "alternates": ["LM358DT"]}

A **notification** (collection ``notifications``, read by the product) is keyed by alert, rule and the
cursor version the rule fired from, so a rule fires once per change however many scanners see it::

    {"_id": "a1:r1:4", "alertId": "a1", "ruleId": "r1", "userId": "u1", "partId": "p1",
     "type": "price_change", "message": "price 1.25 -> 1.40 (+12.0%)", "createdAt": ISODate(...),
     "email": {"to": "buyer@example.com", "status": "pending" | "sending" | "sent" | "failed",
               "attempts": 0, "error": null, "claimedUntil": null, "sentAt": null}}     # or "email": null
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ticklock_parts.alerts.rules import Cursor, Rule, Verdict, stored

DEFAULT_COOLDOWN = timedelta(minutes=60)
_YES = {"yes", "y", "true", "t", "1", "on"}
_NO = {"no", "n", "false", "f", "0", "off"}


@dataclass(frozen=True)
class Alert:
    """An alert document, read: its rules parsed, its raw rules kept for the write-back and its guard."""

    id: str
    user_id: str
    part_id: str
    email: str | None
    rules: tuple[Rule, ...]
    raw_rules: tuple[Mapping[str, Any], ...]
    revision: Any  # what the store compares on write-back: the document as read (opaque to the scanner)
    rules_field: str = "rules"


@dataclass(frozen=True)
class AlertUpdate:
    """The write-back of one alert: its new rules, applied only if it is unchanged since ``revision``."""

    alert_id: str
    rules: list[dict[str, Any]]
    revision: Any
    rules_field: str = "rules"


@dataclass(frozen=True)
class Notification:
    id: str
    alert_id: str
    rule_id: str
    user_id: str
    part_id: str
    type: str
    message: str
    created_at: datetime
    email_to: str | None
    email_status: str | None = None  # pending, sending, sent, failed; None when no email was asked for
    email_attempts: int = 0
    email_error: str | None = None


def truthy(raw: Any, default: bool) -> bool:
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float):
        return raw != 0
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _YES:
            return True
        if text in _NO:
            return False
    return default


def _time(raw: Any) -> datetime | None:
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, str) and raw:
        try:
            value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def _cooldown(raw: Mapping[str, Any]) -> timedelta:
    for name, unit in (("cooldownMinutes", 60.0), ("cooldown", 60.0), ("cooldownSeconds", 1.0)):
        value = raw.get(name)
        if value is None or isinstance(value, bool):
            continue
        try:
            seconds = float(str(value).strip()) * unit
        except ValueError:
            continue
        if seconds >= 0:
            return timedelta(seconds=seconds)
    return DEFAULT_COOLDOWN


def _wants_email(raw: Mapping[str, Any]) -> bool:
    for name in ("notify", "channels"):
        channels = raw.get(name)
        if isinstance(channels, list | tuple):
            return any(isinstance(c, str) and c.strip().lower() == "email" for c in channels)
        if isinstance(channels, str):
            return "email" in channels.lower()
    return any(truthy(raw.get(name), False) for name in ("email", "notifyEmail", "sendEmail"))


def rule_from(raw: Mapping[str, Any], position: int) -> Rule:
    cursor = raw.get("cursor")
    version = cursor.get("version") if isinstance(cursor, Mapping) else None
    return Rule(
        id=str(raw.get("id") or raw.get("ruleId") or raw.get("_id") or position),
        type=raw.get("type") or raw.get("ruleType"),
        operator=raw.get("operator") or raw.get("op"),
        threshold=raw.get("threshold", raw.get("value")),
        flag=str(raw.get("flag") or raw.get("complianceFlag") or "rohs"),
        active=truthy(raw.get("active", raw.get("enabled")), True),
        cooldown=_cooldown(raw),
        email=_wants_email(raw),
        baseline=raw.get("baseline"),
        cursor=Cursor(cursor.get("value"), int(version))
        if isinstance(cursor, Mapping) and isinstance(version, int) and not isinstance(version, bool)
        else None,
        last_checked_at=_time(raw.get("lastCheckedAt")),
        last_triggered_at=_time(raw.get("lastTriggeredAt")),
    )


def alert_from(doc: Mapping[str, Any], revision: Any) -> Alert:
    raw_rules = doc.get("rules")
    if raw_rules is None:
        raw_rules = doc.get("alertRules")
    rules = [r for r in raw_rules if isinstance(r, Mapping)] if isinstance(raw_rules, list) else []
    email = doc.get("email") or doc.get("userEmail")
    return Alert(
        id=str(doc.get("_id") or doc.get("id")),
        user_id=str(doc.get("userId") or doc.get("user_id") or ""),
        part_id=str(doc.get("partId") or doc.get("part_id") or ""),
        email=email if isinstance(email, str) and "@" in email else None,
        rules=tuple(rule_from(r, i) for i, r in enumerate(rules)),
        raw_rules=tuple(rules),
        revision=revision,
        rules_field="alertRules" if doc.get("rules") is None and isinstance(doc.get("alertRules"), list) else "rules",
    )


def written_back(alert: Alert, verdicts: Mapping[str, Verdict]) -> AlertUpdate:
    """The alert's rules with the state of each evaluated rule updated; the rest untouched."""
    rules: list[dict[str, Any]] = []
    for rule, raw in zip(alert.rules, alert.raw_rules, strict=True):
        new = dict(raw)
        verdict = verdicts.get(rule.id)
        if verdict is not None:
            new["lastCheckedAt"] = verdict.checked_at
            new["lastError"] = verdict.error
            if verdict.cursor is not None:
                new["cursor"] = {"value": stored(verdict.cursor.value), "version": verdict.cursor.version}
            if verdict.baseline is not None:
                new["baseline"] = stored(verdict.baseline)
            if verdict.triggered:
                new["lastTriggeredAt"] = verdict.checked_at
        rules.append(new)
    return AlertUpdate(alert.id, rules, alert.revision, alert.rules_field)


def notification_id(alert_id: str, rule_id: str, verdict: Verdict) -> str:
    """One notification per rule per cursor version it fired from ("new" for a first check)."""
    return f"{alert_id}:{rule_id}:{'new' if verdict.previous_version is None else verdict.previous_version}"
