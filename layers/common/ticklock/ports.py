"""The ports: every boundary between the core and the outside world, declared once.

Each method's docstring is its contract; ``tests/contract`` runs one suite per port against every
adapter. Times passed in and returned are aware UTC datetimes.

The store is five role ports, each implemented by one module of each adapter (``adapters/store/sqlite``,
``adapters/store/mongo``) and checked by its own suite in ``tests/contract/store``: ``StoreConnection``
(connection.py), ``JobStore`` (jobs.py), ``FireStore`` (fires.py), ``ExecutionStore`` (executions.py) and
``LedgerStore`` (ledger.py). ``Store`` is all five: what the fire path and the wiring hold; a consumer that
needs less is typed with the roles it uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from ticklock.domain.events import ExecutionEvent
from ticklock.domain.executions import Execution
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.jobs import Job
from ticklock.domain.ledger import LedgerEntry

JOB_SORTS = ("id", "name", "next_run_at", "last_at")
JOB_TIME_SORTS = ("next_run_at", "last_at")  # the sorts on a time, which a job may lack


@dataclass(frozen=True)
class JobQuery:
    """A page of the jobs table: which jobs, in what order, from where.

    ``state``: one of ``domain.states.JOB_FILTERS``: a state (``enabled``, ``paused``, ``held``,
    ``disabled``, ``done``) as ``job_state`` decides it at ``at``, or a condition (``failing``,
    ``alerting``) as ``job_conditions`` does. ``outcome``: the last run's status, or ``none`` for a job
    that never ran. ``search``: a case-insensitive substring of the name or the handler. ``sort``: one of
    ``JOB_SORTS``; by ``next_run_at``, only enabled jobs have a next fire; jobs without a value (no next
    fire, never ran) come after all the others in either direction, by id in that direction. ``after``:
    the sort value (None in that last part) and id of the previous page's last job (keyset paging).
    ``enabled``: only enabled (True) or not enabled (False) jobs.
    """

    search: str | None = None
    handler: str | None = None
    enabled: bool | None = None
    state: str | None = None
    outcome: str | None = None
    sort: str = "name"
    descending: bool = False
    after: tuple[Any, str] | None = None
    at: datetime | None = None  # the instant a state is judged at (whether a hold's end is still ahead)


@dataclass(frozen=True)
class Started:
    """The outcome of ``FireStore.start_execution``: the row for the fire, and whether this call created it."""

    execution: Execution
    created: bool


@dataclass(frozen=True)
class Completion:
    """One run's ``FireStore.complete``, for ``FireStore.complete_many``."""

    execution: Execution
    fire: Fire
    next_run_at: datetime | None


@runtime_checkable
class StoreConnection(Protocol):
    """The backend the other roles share: whether it answers, and letting it go."""

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the backend answers."""
        ...

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""
        ...


@runtime_checkable
class JobStore(Protocol):
    """The job definitions: created, read, listed, counted, changed and deleted, each change one guarded
    write (a version, or the open alerts as they were). Raises ``StoreUnavailable`` when the backend fails."""

    def add_job(self, job: Job) -> Job:
        """Insert a new job. Raises ``DuplicateJobName`` if the name is taken; writes nothing then."""
        ...

    def add_jobs(self, jobs: Sequence[Job]) -> None:
        """Insert new jobs, all or none. Raises ``DuplicateJobName`` naming a taken name (taken in the
        store, or twice in ``jobs``) and writes nothing then. ``StoreUnavailable`` if the store fails: a
        store without transactions deletes what part of the batch it wrote, as far as the store answers."""
        ...

    def get_job(self, job_id: str) -> Job:
        """The job with that id. Raises ``JobNotFound``."""
        ...

    def find_job_by_name(self, name: str) -> Job | None:
        """The job with that name, or None."""
        ...

    def list_jobs(
        self,
        *,
        handler: str | None = None,
        enabled: bool | None = None,
        limit: int = 50,
        after: str | None = None,
        alerting: bool = False,
    ) -> list[Job]:
        """Jobs ordered by id, optionally filtered, starting after the id ``after`` (keyset paging);
        ``alerting``: only those with alert rules or alerts raised."""
        ...

    def find_jobs(self, query: JobQuery, *, limit: int) -> list[Job]:
        """At most ``limit`` jobs matching ``query``, in its order, after its ``after``."""
        ...

    def count_jobs(self, now: datetime) -> dict[str, int]:
        """How many jobs there are (``total``) and how many are in each state and condition of
        ``domain.states.JOB_FILTERS`` at ``now``."""
        ...

    def update_job(self, job: Job, *, expected_version: int) -> Job:
        """Replace a job's definition and schedule state if its version is still ``expected_version``.

        Stores ``job`` with ``version = expected_version + 1`` and leaves its lease as stored (a running
        fire keeps its claim). Raises ``JobNotFound``, ``DuplicateJobName`` (renamed onto a taken name)
        or ``StaleVersion`` (somebody else changed it first); nothing is written on error.
        """
        ...

    def delete_job(self, job_id: str) -> None:
        """Delete a job and its execution history. Raises ``JobNotFound``."""
        ...

    def set_open_alerts(self, job_id: str, *, expected: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Replace the job's ``open_alerts`` with ``new`` if they are still ``expected`` (compared as a
        whole): a compare-and-set that leaves the version, the definition and the lease alone, so that of
        replicas raising or clearing one alert at once exactly one wins. Returns whether it applied."""
        ...


@runtime_checkable
class FireStore(Protocol):
    """A fire's writes, from its claim to its advance: the claim (a lease), the execution's row started,
    taken over and finished, and the job moved on. The row's writes belong with the claim, not with
    ``ExecutionStore``, because a fire's path makes them together: ``complete`` is a finish and an advance in
    one step, which a role holding only one half could not promise. Raises ``StoreUnavailable`` when the
    backend fails."""

    def claim_due(self, *, now: datetime, horizon: datetime, limit: int, owner: str, slack: timedelta) -> list[Job]:
        """Lease up to ``limit`` jobs whose ``due_at`` is at or before ``horizon``, earliest first.

        One atomic step per batch (a conditional update, never read-then-write): a job is returned by
        exactly one concurrent caller. Each returned job carries a new ``Lease`` owned by ``owner`` that
        lasts until ``horizon + slack``, and longer while ``extend_claims`` keeps it (the heartbeat of the
        process that runs its fire); until it ends, or until ``advance`` or ``release``, the job is not due
        (no re-dispatch while it runs). The returned jobs show the definition as it was at the claim.
        """
        ...

    def extend_claims(self, claims: Sequence[tuple[str, str]], *, until: datetime) -> int:
        """Make each claim still held, given as (job id, lease token), last until ``until`` (the job is not due
        before then): a heartbeat, so that a claim lapses seconds after its process dies, whatever the job's
        timeout. A claim advanced, released or taken by another since is left alone. Returns how many were
        extended."""
        ...

    def live_claims(self, *, now: datetime) -> list[tuple[str, Lease]]:
        """Every claim that lasts past ``now``, as (job id, lease): for a process that starts to find those
        of a process known to be dead (on its host, with no such pid alive) and ``release`` them at once."""
        ...

    def release(self, job_id: str, lease_token: str) -> None:
        """Drop the lease without advancing, so the same fire is due again. No-op if the lease moved on."""
        ...

    def advance(self, fire: Fire, *, next_run_at: datetime | None, now: datetime) -> bool:
        """Finish a fire's claim: drop the lease and move the job on.

        For a scheduled fire, ``next_run_at`` None disables the job (one-shot). If the job was edited
        since the claim (its version moved), its new schedule is kept and only the lease is dropped.
        For a manual fire the schedule is untouched and the pending trigger is cleared if it is this
        fire's. Guarded by the lease token: returns False, changing nothing, if the lease was lost.
        """
        ...

    def start_execution(self, execution: Execution) -> Started:
        """Insert the row for a fire unless one of the same fire exists (unique per fire: its job, slot and
        trigger, which its ``fire_key`` spells).

        Returns the stored row and ``created``; an existing row is returned unchanged.
        """
        ...

    def start_executions(self, executions: Sequence[Execution]) -> list[Started]:
        """``start_execution`` for each, in order, in as few writes as the backend allows (one SQLite
        transaction): the runner records the fires it took together at once. Each is judged as if alone,
        after the ones before it (a fire given twice: the second gets the first's row, created False).
        ``StoreUnavailable`` if the store fails; the rows written before it, if any, stand (each is a fire's
        own record, and a later ``start_execution`` of that fire finds it)."""
        ...

    def take_over_execution(self, execution: Execution, *, previous_token: str) -> bool:
        """Resume a fire whose owner vanished: store ``execution`` (new run token, owner, times, status
        RUNNING) only if the row still carries ``previous_token``. Returns whether it did."""
        ...

    def finish_execution(self, execution: Execution) -> bool:
        """Store the final fields of an execution if the row is still RUNNING under the same run token.

        Returns False, changing nothing, if someone else took the row over.
        """
        ...

    def complete(
        self, execution: Execution, fire: Fire, *, next_run_at: datetime | None, now: datetime
    ) -> tuple[bool, bool]:
        """``finish_execution`` then, only if it applied, ``advance``: the hot path's two writes in one step
        where the backend allows (one SQLite transaction). Returns (finished, advanced)."""
        ...

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[tuple[bool, bool]]:
        """``complete`` for each, in order, in as few writes as the backend allows (one SQLite transaction).
        Returns each one's (finished, advanced), as ``complete`` would have. ``StoreUnavailable`` if the store
        fails; what was written before it stands (each write is guarded, so a caller may complete each again
        and learn from ``get_execution`` whether its finish had applied)."""
        ...


@runtime_checkable
class ExecutionStore(Protocol):
    """The executions as history: read one, a job's, a window's, their lags and activity, the unfinished ones
    recovery looks for, and pruning. Raises ``StoreUnavailable`` when the backend fails."""

    def get_execution(self, execution_id: str) -> Execution:
        """The execution with that id. Raises ``JobNotFound`` naming the execution id."""
        ...

    def list_executions(self, job_id: str, *, limit: int = 50, before: str | None = None) -> list[Execution]:
        """A job's executions, newest fire first, starting after the execution id ``before``."""
        ...

    def executions_between(
        self,
        job_id: str | None,
        *,
        start: datetime,
        end: datetime,
        limit: int,
        statuses: Sequence[str] | None = None,
    ) -> list[Execution]:
        """The executions (of one job, or of all) of fires scheduled in [start, end], in ``statuses`` if
        given, newest fire first, at most ``limit``."""
        ...

    def lags(self, *, start: datetime, end: datetime, limit: int) -> list[float]:
        """The dispatch lag (``Execution.lag``: seconds from when the fire was due to its start) of the
        executions of fires scheduled in [start, end], newest fire first, at most ``limit``: the overview's
        sample, read without the rest of each execution."""
        ...

    def activity(self, *, start: datetime, end: datetime, step: timedelta) -> list[tuple[datetime, str, int]]:
        """How many executions of fires scheduled in [start, end) there are by status, per ``step`` (whole
        seconds, the buckets aligned on the epoch): (bucket start, status, count), earliest first."""
        ...

    def execution_for(self, job_id: str, trigger: Trigger, scheduled_at: datetime) -> Execution | None:
        """The execution of that fire (job ``job_id``'s fire of ``trigger`` for slot ``scheduled_at``: what
        ``Fire.key`` spells), if there is one."""
        ...

    def open_executions(self, *, deadline_before: datetime, limit: int) -> list[Execution]:
        """The ``detached`` executions not final (RUNNING or INTERRUPTED) whose deadline is before
        ``deadline_before``, earliest deadline first, at most ``limit``: fires whose job went on when they
        started (allow_all) and whose runner vanished or was cut off."""
        ...

    def prune_executions(self, *, older_than: datetime, keep_per_job: int) -> int:
        """Delete finished executions older than ``older_than``, and all but the newest ``keep_per_job``
        finished ones of each job (backfill runs go by age alone: they say which slots a backfill ran),
        and the ledger's entries whose last slot is older than ``older_than``.
        Never deletes a RUNNING or INTERRUPTED row. Returns how many went."""
        ...


@runtime_checkable
class LedgerStore(Protocol):
    """The fire ledger: the fires that did not run, one entry each however many record it. Raises
    ``StoreUnavailable`` when the backend fails."""

    def record_fire(self, entry: LedgerEntry) -> bool:
        """Insert ``entry`` unless one with its id exists (replicas and retries recording one fire leave
        one entry); returns whether it was inserted."""
        ...

    def list_fires(
        self,
        job_id: str | None,
        *,
        start: datetime,
        end: datetime,
        outcome: str | None = None,
        reason: str | None = None,
        limit: int = 100,
    ) -> list[LedgerEntry]:
        """The entries (of one job, or of all) whose range of slots meets [start, end], filtered by
        outcome and reason, latest first slot first, at most ``limit``."""
        ...


@runtime_checkable
class Store(StoreConnection, JobStore, FireStore, ExecutionStore, LedgerStore, Protocol):
    """Where jobs, executions and the ledger live: every role, on one backend. It adds no method of its
    own: each belongs to exactly one role."""


class Locker(Protocol):
    """Mutual exclusion per job across every process that shares the backend."""

    def acquire(self, key: str, ttl: float) -> str | None:
        """Take ``key`` for ``ttl`` seconds. Returns a token, or None if someone else holds it.

        Raises ``LockUnavailable`` if the backend cannot answer.
        """
        ...

    def release(self, key: str, token: str) -> None:
        """Give ``key`` back, only if ``token`` still holds it. Raises ``LockUnavailable``."""
        ...

    def extend(self, key: str, token: str, ttl: float) -> bool:
        """Make ``key`` expire ``ttl`` seconds from now (later or sooner than it would have), only if
        ``token`` still holds it: one atomic check-and-set, so a lock that lapsed and was taken by another
        holder is left alone. Returns False, changing nothing, when ``token`` no longer holds ``key`` (lapsed,
        released, taken by another). A holder calls it while its run goes on, so that a short ``ttl`` is
        kept alive by a live process and lapses soon after a dead one. Raises ``ValueError`` if ``ttl`` is
        not positive, ``LockUnavailable`` if the backend cannot answer.
        """
        ...

    def close(self) -> None:
        """Let go of the backend's connections (the process is done with the lock). Not a release: a key
        still held stays held until its TTL. Idempotent."""
        ...


class Publisher(Protocol):
    """Where execution events go. May raise anything: the lifecycle logs it and carries on."""

    publishes: bool
    """False for a publisher that drops every event unseen (``none``): the lifecycle then does not build a
    fire's started and finished events for it (each with the execution's record); the rare ones (lost,
    not run, disabled) it still hands over."""

    def publish(self, event: ExecutionEvent) -> None:
        """Send one event, or queue it for sending; must not block for long."""
        ...

    def flush(self, timeout: float) -> None:
        """Send what is queued, waiting at most ``timeout`` seconds (end of a Lambda invocation, shutdown)."""
        ...


class Metrics(Protocol):
    """Counters and histograms per handler. May raise: the lifecycle logs it and carries on."""

    def fire_started(self, handler: str, lag: float) -> None:
        """A handler started; ``lag`` is start minus scheduled time, in seconds."""
        ...

    def fire_finished(self, handler: str, status: str, duration: float, attempts: int) -> None:
        """An execution reached a final (or interrupted) status."""
        ...

    def fire_skipped(self, handler: str, reason: str) -> None:
        """A fire was not run; ``reason`` is one of a small fixed set (see ``SkipReason``)."""
        ...

    def fires_accounted(self, outcome: str, reason: str, count: int) -> None:
        """``count`` fires reached their ledger outcome (``ran`` with the execution's status as the
        reason, or ``skipped`` / ``missed`` with a ledger reason)."""
        ...

    def job_disabled(self, handler: str) -> None:
        """A job was disabled because its schedule could not compute a next fire."""
        ...

    def tick(self, claimed: int, seconds: float, failed: bool) -> None:
        """One dispatcher tick claimed ``claimed`` jobs in ``seconds``; ``failed`` if the store failed."""
        ...

    def flush(self) -> None:
        """Send what was recorded where it goes (a no-op for scraped metrics)."""
        ...


class FireQueue(Protocol):
    """Between the dispatcher and whatever runs fires: the local pool (``engine/pool.py``, what ``ticklock
    serve`` runs fires on) or an SQS queue (``adapters/queue/sqs.py``, which the runner functions receive).
    ``tests/contract/queue`` runs both through the same cases.

    Every fire given to ``submit`` ends as exactly one of: handed over (it reaches what runs fires once, the
    same job, slot, trigger and lease token), named by a ``QueueUnavailable``, or returned by
    ``drain_unstarted``. The caller gives the last two back to the store, so that they are claimed again:
    nothing claimed is lost. (SQS itself may deliver a sent message more than once: the fire's execution
    record absorbs that, not the queue.)
    """

    def submit(self, fire: Fire) -> None:
        """Hand ``fire`` over, or buffer it to be handed over with others (SQS: in batches of ten, sent when
        a batch is full or at ``flush``).

        Backpressure: a bounded queue (the pool) waits while it is full, until a consumer makes room, so that
        the dispatcher falls behind the clock instead of growing memory. An unbounded one (SQS, whose
        runners' concurrency bounds the work) never waits for room.

        Raises ``QueueUnavailable`` naming the fires not handed over - ``fire``, and for a buffering queue the
        buffered fires it was sending with it - which are then no longer held: when the queue cannot be
        reached, and once it takes no more work (after ``drain_unstarted``; the pool also after
        ``close_intake`` or ``stop``), even a ``submit`` that was waiting for room at that moment.
        """
        ...

    def free_slots(self) -> int:
        """How many more fires ``submit`` takes now without waiting; never negative. A bounded queue's count
        falls by one for each fire that waits in it and rises as consumers take them; an unbounded one
        answers the same large number always. (No runtime consults it: ``submit`` is the backpressure.)"""
        ...

    def flush(self) -> None:
        """Hand over what ``submit`` buffered; once it returns, every fire submitted before it is handed over.
        The dispatcher calls it after each release of fires. A no-op for a queue that buffers nothing.

        Raises ``QueueUnavailable`` naming the fires that could not be handed over (no longer buffered)."""
        ...

    def drain_unstarted(self) -> Sequence[Fire]:
        """Take no more work (``submit`` raises from now on, a waiting one too) and return the fires handed to
        ``submit`` that no consumer has started and none will: the pool's queued fires, SQS's buffered ones
        (a fire sent to SQS is its runners'). A fire a consumer already took runs to its end. ``ticklock
        serve``'s shutdown calls it and gives the fires back to the store; the tick function need not (its
        dispatcher flushes after every release, so nothing stays buffered)."""
        ...


class EmailSender(Protocol):
    """Sends an email: the engine's notifier, for plug-ins (the alert scanner) and the engine alike.
    Adapters: ``adapters/email/smtp.py`` (an SMTP URL) and ``adapters/email/ses.py`` (Amazon SES v2),
    chosen by ``TICKLOCK_EMAIL`` through ``adapters.email.sender_from``."""

    async def send(self, to: str, subject: str, body: str) -> None:
        """Send one plain-text email; raise ``EmailUnavailable`` when it was not taken (the caller keeps
        it to try again)."""
        ...


class WebhookSender(Protocol):
    """Posts a JSON document to a URL: the engine's other notifier. Adapter: ``adapters/webhook/http.py``,
    configured by ``TICKLOCK_WEBHOOK_*`` through ``adapters.webhook.webhook_from``."""

    async def post(self, url: str, document: Mapping[str, Any]) -> None:
        """POST ``document`` as JSON, signed; return once the receiver answered 2xx, else raise
        ``WebhookUnavailable`` (the caller keeps it to try again). Raises ``ValueError`` for a URL that is
        not http(s)."""
        ...


class Outbox(Protocol):
    """Where alerts go out to webhooks and mailboxes without making anyone wait: each delivery is tried in
    the background until it is taken. Implementation: ``engine/outbox.py``."""

    def post(self, url: str, document: Mapping[str, Any]) -> None:
        """Deliver ``document`` to the webhook at ``url`` (through the ``WebhookSender``; nothing without one)."""
        ...

    def mail(self, to: str, subject: str, body: str) -> None:
        """Deliver an email to ``to`` (through the ``EmailSender``; nothing without one)."""
        ...

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every delivery to be made or given up; True if none is left."""
        ...

    def close(self) -> None:
        """Stop delivering; what still waits for a retry is dropped (and logged)."""
        ...
