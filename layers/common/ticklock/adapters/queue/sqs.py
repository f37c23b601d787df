"""Fires on an SQS queue, for the Lambda deployment: the tick function sends, runner functions receive.

A message carries the whole fire - the job as claimed, the fire time, the trigger and the lease token -
so a runner needs no extra read to start it. ``submit`` buffers; ``flush`` sends with
``SendMessageBatch``, ten entries a call, and retries the entries listed in ``Failed`` (then raises
``QueueUnavailable`` naming them, so that the tick releases those fires rather than losing them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import boto3
from botocore.config import Config

from ticklock.adapters.records import ISO, fire_from_record, fire_record
from ticklock.domain.fires import Fire
from ticklock.errors import QueueUnavailable

BATCH = 10  # SendMessageBatch takes at most ten entries
ATTEMPTS = 3
UNBOUNDED = 1_000_000  # ``free_slots``: SQS holds what it is given; the runners' concurrency bounds the work


def sqs_client(endpoint_url: str | None = None) -> Any:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("sqs", region_name=region, endpoint_url=endpoint_url, config=config)


# What runners read: 1 (the lease as one object) and 2 (the shared record's flat lease fields). What the
# tick writes stays 1 for this release, so that a runner still on the release before, warm during a
# deployment, reads what a new tick sends; the next release writes 2.
READS = (1, 2)
WRITES = 1


def encode_fire(fire: Fire) -> str:
    """The fire as a message: the shared record (``adapters/records.py``) with RFC 3339 times, in the
    layout of version ``WRITES``."""
    record = fire_record(fire, ISO)
    if WRITES == 1:
        job = record["job"]
        token, owner, until = (job.pop(f"lease_{k}") for k in ("token", "owner", "until"))
        job["lease"] = {"token": token, "owner": owner, "until": until} if token else None
    return json.dumps({"v": WRITES, **record}, separators=(",", ":"))


def decode_fire(body: str) -> Fire:
    """The fire a message carries. Raises ``ValueError`` (or ``KeyError``) on a malformed message."""
    data = json.loads(body)
    if data.get("v") not in READS:
        raise ValueError(f"unknown fire message version {data.get('v')!r}")
    if data["v"] == 1:
        job = dict(data["job"])
        lease = job.pop("lease", None) or {}
        job.update(lease_token=lease.get("token"), lease_owner=lease.get("owner"), lease_until=lease.get("until"))
        data = {**data, "job": job}
    return fire_from_record(data, ISO)


class SQSQueue:
    """The ``FireQueue`` port on an SQS queue. Unbounded: ``submit`` never waits for room."""

    def __init__(self, queue_url: str, *, client: Any = None) -> None:
        self.queue_url = queue_url
        self._client = client or sqs_client()
        self._buffer: list[Fire] = []
        self._taking = True  # until ``drain_unstarted``

    def submit(self, fire: Fire) -> None:
        if not self._taking:
            raise QueueUnavailable("the fire queue takes no more fires (drained)", [fire])
        self._buffer.append(fire)
        if len(self._buffer) >= BATCH:
            self.flush()

    def free_slots(self) -> int:
        return UNBOUNDED

    def flush(self) -> None:
        fires, self._buffer = self._buffer, []
        for start in range(0, len(fires), BATCH):
            self._send(fires[start : start + BATCH])

    def drain_unstarted(self) -> Sequence[Fire]:
        self._taking = False
        fires, self._buffer = self._buffer, []
        return fires

    def _send(self, fires: list[Fire]) -> None:
        pending = {str(i): fire for i, fire in enumerate(fires)}
        error = ""
        for _ in range(ATTEMPTS):
            entries = [{"Id": key, "MessageBody": encode_fire(fire)} for key, fire in pending.items()]
            try:
                answer = self._client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except Exception as exc:  # noqa: BLE001 - reported below with the fires it concerns
                error = f"{type(exc).__name__}: {exc}"
                continue
            failed = answer.get("Failed", [])
            pending = {f["Id"]: pending[f["Id"]] for f in failed}
            if not pending:
                return
            error = ", ".join(sorted({f"{f.get('Code')}: {f.get('Message')}" for f in failed}))
        raise QueueUnavailable(f"{len(pending)} fire(s) could not be queued: {error}", list(pending.values()))
