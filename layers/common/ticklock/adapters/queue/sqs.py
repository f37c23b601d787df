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
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config

from ticklock.domain.jobs import Fire, Job, Lease, Trigger
from ticklock.domain.schedules import schedule_from_dict, schedule_to_dict
from ticklock.errors import QueueUnavailable

BATCH = 10  # SendMessageBatch takes at most ten entries
ATTEMPTS = 3


def sqs_client(endpoint_url: str | None = None) -> Any:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("sqs", region_name=region, endpoint_url=endpoint_url, config=config)


def encode_fire(fire: Fire) -> str:
    job = fire.job
    lease = job.lease
    return json.dumps(
        {
            "v": 1,
            "scheduled_at": fire.scheduled_at.isoformat(),
            "trigger": fire.trigger.value,
            "lease_token": fire.lease_token,
            "job": {
                "id": job.id,
                "name": job.name,
                "handler": job.handler,
                "schedule": schedule_to_dict(job.schedule),
                "payload": dict(job.payload),
                "timeout": job.timeout,
                "max_retries": job.max_retries,
                "enabled": job.enabled,
                "version": job.version,
                "next_run_at": job.next_run_at.isoformat() if job.next_run_at else None,
                "trigger_at": job.trigger_at.isoformat() if job.trigger_at else None,
                "created_at": job.created_at.isoformat(),
                "updated_at": job.updated_at.isoformat(),
                "lease": {"token": lease.token, "owner": lease.owner, "until": lease.until.isoformat()}
                if lease
                else None,
            },
        },
        separators=(",", ":"),
    )


def decode_fire(body: str) -> Fire:
    """The fire a message carries. Raises ``ValueError`` (or ``KeyError``) on a malformed message."""
    data = json.loads(body)
    if data.get("v") != 1:
        raise ValueError(f"unknown fire message version {data.get('v')!r}")
    j = data["job"]
    lease = j.get("lease")
    job = Job(
        id=j["id"],
        name=j["name"],
        handler=j["handler"],
        schedule=schedule_from_dict(j["schedule"]),
        payload=j["payload"],
        timeout=float(j["timeout"]),
        max_retries=int(j["max_retries"]),
        enabled=bool(j["enabled"]),
        version=int(j["version"]),
        next_run_at=_time(j["next_run_at"]),
        trigger_at=_time(j["trigger_at"]),
        created_at=datetime.fromisoformat(j["created_at"]),
        updated_at=datetime.fromisoformat(j["updated_at"]),
        lease=Lease(lease["token"], lease["owner"], datetime.fromisoformat(lease["until"])) if lease else None,
    )
    return Fire(job, datetime.fromisoformat(data["scheduled_at"]), Trigger(data["trigger"]), data["lease_token"])


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class SQSQueue:
    """The ``FireQueue`` port on an SQS queue."""

    def __init__(self, queue_url: str, *, client: Any = None) -> None:
        self.queue_url = queue_url
        self._client = client or sqs_client()
        self._buffer: list[Fire] = []

    def submit(self, fire: Fire) -> None:
        self._buffer.append(fire)
        if len(self._buffer) >= BATCH:
            self.flush()

    def free_slots(self) -> int:
        return 1_000_000  # SQS holds what it is given; the runners' concurrency bounds the work

    def flush(self) -> None:
        fires, self._buffer = self._buffer, []
        for start in range(0, len(fires), BATCH):
            self._send(fires[start : start + BATCH])

    def drain_unstarted(self) -> Sequence[Fire]:
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
