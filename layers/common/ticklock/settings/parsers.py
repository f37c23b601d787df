"""The parsers of the engine's own settings that ``ticklock.handlers.plugin`` does not share: the lock, the
events' sink and the email notifier. Each takes the text and returns the value, or raises ``ValueError``
saying what it expected."""

from __future__ import annotations


def lock_url(text: str) -> str:
    value = text.strip()
    if value != "local" and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"must be local, redis://..., rediss://... or unix://..., got {text!r}")
    return value


def events_sink(text: str) -> str:
    value = text.strip()
    if value.lower() in ("none", "log"):
        return value.lower()
    if value.startswith("eventbridge:") and len(value) > len("eventbridge:"):
        return value
    raise ValueError(f"must be none, log or eventbridge:<bus name or ARN>, got {text!r}")


def email_notifier(text: str) -> str:
    text = text.strip()
    if text and text != "ses" and not text.startswith(("smtp://", "smtps://")):
        raise ValueError(f"expected empty, ses, or an smtp:// / smtps:// URL, got {text!r}")
    return text
