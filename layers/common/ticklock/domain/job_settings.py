"""What a user sets on a job beside its schedule and handler: how its fires are decided (``Policy``) and
when its alerts are raised (``AlertRules``). Each checks its fields as it is built, so a stored or given
value that is out of range never reaches a job."""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from ticklock.errors import InvalidJob

MAX_CATCHUP_WINDOW = 30 * 86400.0
MAX_JITTER = 3600.0
BUFFER_ALL_CAP = 100  # fires buffer_all keeps waiting at most; older ones are skipped


class Overlap(enum.StrEnum):
    """What happens to a job's fire that comes due while its previous run is still going (Temporal's
    names). Runs of one job never overlap, except under ``allow_all``."""

    SKIP = "skip"  # it is skipped (overlap_skip); the job goes on at its next slot after the run
    BUFFER_ONE = "buffer_one"  # the latest such fire runs right after; the others are skipped
    BUFFER_ALL = "buffer_all"  # each runs in turn, oldest first; past BUFFER_ALL_CAP the oldest are skipped
    CANCEL_OTHER = "cancel_other"  # the running attempt is cancelled, and the new fire starts when it ends
    ALLOW_ALL = "allow_all"  # it starts at its time, beside the run that goes on


POLICY_FIELDS = ("catchup_window", "overlap", "max_jitter")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLI = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Policy:
    """How a job's fires are decided, beyond its schedule. The defaults are ticklock's behaviour before
    there were policies.

    ``catchup_window``: seconds a scheduled fire may be late and still run (once, carrying its own time);
    a fire later than that is ``missed`` with ``catchup_window_passed`` and the job moves on. None: any
    lateness is caught up.

    ``overlap``: an ``Overlap``, for the slots that come due while a run goes on.

    ``max_jitter``: each scheduled fire starts up to this many seconds after its slot, by an offset
    drawn from the job and the slot (``jitter``): the same on every replica and every retry."""

    catchup_window: float | None = None
    overlap: Overlap = Overlap.SKIP
    max_jitter: float = 0.0

    def __post_init__(self) -> None:
        window = self.catchup_window
        if window is not None:
            window = _seconds(window, "policy.catchup_window", "or null")
            if not 1.0 <= window <= MAX_CATCHUP_WINDOW:
                raise InvalidJob(
                    f"must be from 1 to {MAX_CATCHUP_WINDOW:g} seconds, got {window:g}", field="policy.catchup_window"
                )
            object.__setattr__(self, "catchup_window", window)  # 300 and 300.0 are one policy
        if not isinstance(self.overlap, Overlap):
            if self.overlap not in tuple(Overlap):
                choices = ", ".join(o.value for o in Overlap)
                raise InvalidJob(f"must be one of {choices}, not {self.overlap!r}", field="policy.overlap")
            object.__setattr__(self, "overlap", Overlap(self.overlap))
        jitter = _seconds(self.max_jitter, "policy.max_jitter", "")
        if not 0.0 <= jitter <= MAX_JITTER:
            raise InvalidJob(f"must be from 0 to {MAX_JITTER:g} seconds, got {jitter:g}", field="policy.max_jitter")
        object.__setattr__(self, "max_jitter", jitter)

    def jitter(self, job_id: str, slot: datetime) -> float:
        """The offset of the fire at ``slot``, in whole milliseconds from 0 to ``max_jitter``: a hash of
        the job and the slot, so every replica and every retry of the fire agrees on it."""
        if not self.max_jitter:
            return 0.0
        # the slot in whole milliseconds: MongoDB keeps times to the millisecond, and an interval job's slot
        # (now + interval) has microseconds, so the stored slot and the computed one hash alike
        millis = (slot - _EPOCH) // _MILLI
        digest = hashlib.blake2b(f"{job_id}:{millis}".encode(), digest_size=8).digest()
        return (int.from_bytes(digest) * (math.floor(self.max_jitter * 1000) + 1) >> 64) / 1000

    def to_dict(self) -> dict[str, Any]:
        """Every field (the API shows them all)."""
        return {"catchup_window": self.catchup_window, "overlap": self.overlap.value, "max_jitter": self.max_jitter}

    def to_record(self) -> dict[str, Any]:
        """The fields as stored and sent: ``catchup_window``, and the others only when they are not their
        default, so that a release from before them (which refuses fields it does not know) still reads
        the records of jobs that do not use them, in a store or an SQS message, during a rolling deploy."""
        record: dict[str, Any] = {"catchup_window": self.catchup_window}
        if self.overlap is not Overlap.SKIP:
            record["overlap"] = self.overlap.value
        if self.max_jitter:
            record["max_jitter"] = self.max_jitter
        return record

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> Policy:
        """A stored or given policy; keys it does not know are refused, missing ones take their default."""
        data = data or {}
        unknown = set(data) - set(POLICY_FIELDS)
        if unknown:
            raise InvalidJob(f"unknown policy field {sorted(unknown)[0]!r}", field="policy")
        defaults = Policy()
        return Policy(**{name: data.get(name, getattr(defaults, name)) for name in POLICY_FIELDS})


def _seconds(value: Any, where: str, alternative: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJob(f"must be a number of seconds{' ' + alternative if alternative else ''}", field=where)
    return float(value)


MAX_ALERT_SECONDS = 366 * 86400.0
MAX_FAILURES_IN_A_ROW = 1000


class Condition(enum.StrEnum):
    """What an alert says about a job."""

    LATE = "late"  # a fire did not start within ``late_after`` seconds of when it was due
    NO_SUCCESS = "no_success"  # no run succeeded for ``no_success_for`` seconds
    FAILURES = "failures_in_a_row"  # the last ``failures_in_a_row`` runs all failed


ALERT_FIELDS = ("late_after", "no_success_for", "failures_in_a_row", "webhook", "email")


@dataclass(frozen=True)
class AlertRules:
    """When a job's alerts are raised, and where they go beside the event bus (a webhook, an email
    address; either defaults to the deployment's, ``TICKLOCK_ALERTS_WEBHOOK`` / ``TICKLOCK_ALERTS_EMAIL``).
    A rule left out (None) is not checked."""

    late_after: float | None = None
    no_success_for: float | None = None
    failures_in_a_row: int | None = None
    webhook: str | None = None
    email: str | None = None

    def __post_init__(self) -> None:
        for name in ("late_after", "no_success_for"):
            value = getattr(self, name)
            if value is None:
                continue
            seconds = _seconds(value, f"alerts.{name}", "or null")
            if not 1.0 <= seconds <= MAX_ALERT_SECONDS:
                raise InvalidJob(
                    f"must be from 1 to {MAX_ALERT_SECONDS:g} seconds, got {seconds:g}", field=f"alerts.{name}"
                )
            object.__setattr__(self, name, seconds)
        count = self.failures_in_a_row
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FAILURES_IN_A_ROW
        ):
            raise InvalidJob(
                f"must be a whole number from 1 to {MAX_FAILURES_IN_A_ROW}", field="alerts.failures_in_a_row"
            )
        url = self.webhook
        if url is not None and (not isinstance(url, str) or len(url) > 2000 or not _http_url(url)):
            raise InvalidJob("must be an http(s) URL with a host, of at most 2,000 characters", field="alerts.webhook")
        address = self.email
        if address is not None and (
            not isinstance(address, str)
            or len(address) > 320
            or "@" not in address
            or any(c in address for c in "\r\n")
        ):
            raise InvalidJob("must be an email address", field="alerts.email")

    @property
    def checked(self) -> bool:
        return any(v is not None for v in (self.late_after, self.no_success_for, self.failures_in_a_row))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ALERT_FIELDS}

    @staticmethod
    def from_dict(data: Mapping[str, Any] | None) -> AlertRules | None:
        """Given or stored rules; None (or {}) is no alerts. Unknown keys are refused."""
        if not data:
            return None
        unknown = set(data) - set(ALERT_FIELDS)
        if unknown:
            raise InvalidJob(f"unknown alerts field {sorted(unknown)[0]!r}", field="alerts")
        return AlertRules(**{name: data.get(name) for name in ALERT_FIELDS})


def _http_url(url: str) -> bool:
    """An http(s) URL with a host, that parses (``http://[x`` does not: an IPv6 host left open)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in url)
