"""The production store: MongoDB (tested on FerretDB 1.24 and, when MONGODB_URI is set, on MongoDB).

Documents (times are BSON dates, so millisecond precision; ids are strings; a field whose value is null
is left out, and an update unsets it: ``documents.py``, ``_present`` and ``setting``):

* ``jobs``: ``_id, name, handler, schedule{kind,...}, payload (JSON text), timeout, max_retries, enabled, next_run_at,
  trigger_at, due_at, lease_token, lease_owner, lease_until, version, created_at, updated_at``.
  Indexes: ``name`` unique, ``due_at`` (the due query), ``lease_token`` (reading a claim back),
  ``handler, _id`` (listing).
* ``executions``: ``_id, job_id, fire_key, handler, trigger, scheduled_at, started_at, deadline_at,
  run_token, owner, status, attempts, resumes, finished_at, duration, error``. Indexes: ``fire_key``
  unique (one execution per fire), ``job_id, scheduled_at, _id`` (listing), ``finished_at`` (pruning).
* ``ledger``: ``_id (<job>:<outcome>:<first slot>), job_id, outcome, reason, first_at, last_at, count,
  capped, trigger, recorded_at``: the fires that did not run. Indexes: ``job_id, first_at``, ``first_at``,
  ``last_at`` (pruning).

The claim is three commands per batch: read up to ``limit`` due candidates; insert one *claim mark* per
candidate into ``claims``, whose ``_id`` is ``<job id>:<seq>`` (``seq`` moves on with every claim,
release, advance and edit), so the unique ``_id`` lets exactly one claimer win each job state; then an
``updateMany`` per distinct timeout sets the winners' leases (usually one). A fire then costs two
commands and a share of a third: insert the execution (unique ``fire_key``), finish it, and advance the
job, written together with the advances of the fires finishing at the same moment (one ``bulkWrite``
of guarded ``updateOne``; a group commit).

Why the marks, rather than an ``updateOne`` guarded by ``due_at``: FerretDB 1.24 (SQLite backend)
evaluates an update's filter and writes the result in separate steps, so two concurrent conditional
updates can both apply (tests/contract showed one job claimed by four claimers). A unique-key insert is
atomic on FerretDB and MongoDB alike. The other guarded updates (version on edits, lease token on
advance, run token on finish) are exact on MongoDB and best-effort on FerretDB; one run per fire never
rests on them: it rests on the unique ``fire_key`` and the lock. FerretDB 1.24 also lacks partial and TTL
indexes and pipeline updates, so none is used; old claim marks are deleted by the pruning pass.
"""

from __future__ import annotations

from ticklock.adapters.store.mongo.client import CommandCounter, shared_client
from ticklock.adapters.store.mongo.executions import Executions
from ticklock.adapters.store.mongo.fires import Fires
from ticklock.adapters.store.mongo.jobs import Jobs
from ticklock.adapters.store.mongo.ledger import Ledger

__all__ = ["CommandCounter", "MongoStore", "shared_client"]


class MongoStore(Jobs, Fires, Executions, Ledger):
    """The ``Store`` port on MongoDB, a role a module: connection.py ``StoreConnection`` (client,
    collections, indexes, errors), jobs.py ``JobStore``, fires.py ``FireStore`` (claims, executions' start
    and finish, grouped advances), executions.py ``ExecutionStore`` (reads, pruning), ledger.py
    ``LedgerStore`` (the fires that did not run), over documents.py, group_commit.py and client.py."""
