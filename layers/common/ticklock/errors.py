"""The exceptions ticklock raises. Each class's docstring is its default message.

Driver errors never leak: adapters wrap them in one of these with ``raise ... from exc``.
The API maps them to HTTP statuses in one place (``ticklock.api.errors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ticklock.domain.fires import Fire


class TicklockError(Exception):
    """Something went wrong in ticklock."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self)


class ConfigError(TicklockError):
    """The configuration is invalid."""


class InvalidJob(TicklockError):
    """The job definition is invalid."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InvalidJobs(InvalidJob):
    """Some jobs of a batch are invalid: ``problems`` holds each, its field prefixed by the job's place."""

    def __init__(self, problems: Sequence[InvalidJob]) -> None:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{first.message}{more}", field=first.field)
        self.problems = list(problems)


class JobNotFound(TicklockError):
    """No job has that id."""

    def __init__(self, job_id: str) -> None:
        shown = repr(job_id) if len(job_id) <= 64 else f"{job_id[:64]!r}... ({len(job_id)} characters)"
        super().__init__(f"no job with id {shown}")
        self.job_id = job_id


class DuplicateJobName(TicklockError):
    """A job with that name already exists."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a job named {name!r} already exists")
        self.name = name


class ConflictError(TicklockError):
    """The request conflicts with the job's current state."""


class StaleVersion(ConflictError):
    """The job changed since it was read; read it again and retry."""


class HandlerError(TicklockError):
    """A handler registration problem."""


class DuplicateHandler(HandlerError):
    """Two handlers were registered under one name."""

    def __init__(self, name: str, first: str, second: str) -> None:
        super().__init__(f"handler {name!r} is registered twice: by {first} and by {second}")
        self.name = name


class StoreUnavailable(TicklockError):
    """The job store could not be reached or failed."""


class LockUnavailable(TicklockError):
    """The lock backend could not be reached or failed."""


class QueueUnavailable(TicklockError):
    """Fires could not be handed to the queue; ``fires`` are the ones not handed over."""

    def __init__(self, message: str, fires: Sequence[Fire]) -> None:
        super().__init__(message)
        self.fires = list(fires)


class EmailUnavailable(TicklockError):
    """An ``EmailSender`` could not hand the email over (the server refused it, or did not answer)."""


class WebhookUnavailable(TicklockError):
    """A ``WebhookSender`` could not deliver the call (no answer in time, or an answer other than 2xx)."""
