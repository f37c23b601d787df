"""The parsers of the engine's own settings that ``ticklock.handlers.plugin`` does not share: the lock, the
events' sink, the email notifier and the CPUs. Each takes the text and returns the value, or raises
``ValueError`` saying what it expected."""

from __future__ import annotations

import re
from typing import Literal


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


_CPU_PART = re.compile(r"([0-9]+)(?:-([0-9]+))?")
MAX_CPU = 8191  # the highest CPU number Linux builds for (CONFIG_NR_CPUS is at most 8,192)


def _cpu(digits: str) -> int:
    # past MAX_CPU either way; and int() would refuse a number of over 4,300 digits with a message of its own
    return int(digits) if len(digits) <= 6 else MAX_CPU + 1


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "...")


def cpu_list(text: str, expected: str = "CPU numbers and ranges such as 0,2-3") -> tuple[int, ...]:
    """CPU numbers and ranges (``0,2-3``), as the CPUs they name, sorted; empty for none given (``expected``:
    what an error says was expected). Whether this process may run on them is checked where they are
    applied (``runtimes.local.place_engine``)."""
    if not text.strip():
        return ()
    ranges = []
    for part in text.split(","):
        match = _CPU_PART.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"expected {expected}, got {_shown(text)}")
        first, last = _cpu(match[1]), _cpu(match[2] or match[1])
        if last > MAX_CPU:
            raise ValueError(f"CPUs are numbered 0 to {MAX_CPU}, got {_shown(part.strip())} in {_shown(text)}")
        if last < first:
            raise ValueError(
                f"a range runs from the lower CPU to the higher, got {_shown(part.strip())} in {_shown(text)}"
            )
        ranges.append((first, last))
    cpus: list[int] = []
    upto = -1  # the ranges merged, so that a long list of wide ranges costs no more than 8,192 CPUs
    for first, last in sorted(ranges):
        cpus.extend(range(max(first, upto + 1), last + 1))
        upto = max(upto, last)
    return tuple(cpus)


Cpus = Literal["auto", "any"] | tuple[int, ...]  # the engine's CPUs: one chosen at start, wherever, or these


def cpu_choice(text: str) -> Cpus:
    """TICKLOCK_CPUS: ``auto`` (one CPU for the engine, chosen at start), ``any`` or empty (no keeping), or
    CPU numbers and ranges (``cpu_list``)."""
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    if word in ("any", ""):
        return "any"
    return cpu_list(text, expected="auto, any, or CPU numbers and ranges such as 0,2-3")
