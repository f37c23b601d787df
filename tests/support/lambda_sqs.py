"""What Lambda does around ticklock's functions, done here by hand (moto cannot run Lambda code without
Docker, and its event source mappings call a function once per message, ignoring concurrency and
partial batch failures).

* ``EventSourceMapping`` polls an SQS queue like Lambda's SQS poller: receive up to ``batch_size``
  messages with their attributes, call the function with the SQS event shape, then delete the records
  the function did not report in ``batchItemFailures``. Failed ones come back after the visibility timeout.
* ``LambdaContext`` is the context object, with a deadline.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def function_module(name: str) -> ModuleType:
    """``functions/<name>/app.py``, loaded as Lambda loads it (a module of its own named by its folder)."""
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"lambda_{name}_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    """The parts of Lambda's context object that ticklock and powertools read."""

    timeout: float = 60.0
    function_name: str = "ticklock-test"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ticklock-test"
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout - (time.monotonic() - self.started)) * 1000))


def sqs_event(messages: list[dict[str, Any]], arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """The event Lambda's SQS event source mapping delivers, built from ``receive_message`` answers."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {
                    "ApproximateReceiveCount": m.get("Attributes", {}).get("ApproximateReceiveCount", "1"),
                    "SentTimestamp": m.get("Attributes", {}).get("SentTimestamp", "0"),
                    "SenderId": m.get("Attributes", {}).get("SenderId", "AIDAEXAMPLE"),
                    "ApproximateFirstReceiveTimestamp": m.get("Attributes", {}).get(
                        "ApproximateFirstReceiveTimestamp", "0"
                    ),
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(m["Body"].encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


@dataclass
class EventSourceMapping:
    client: Any
    queue_url: str
    handler: Handler
    batch_size: int = 10
    invocations: int = 0
    failures: int = 0

    def __post_init__(self) -> None:
        attributes = self.client.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        self.arn = attributes["Attributes"]["QueueArn"]

    def receive(self, wait: int = 0) -> list[dict[str, Any]]:
        answer = self.client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            AttributeNames=["All"],
            WaitTimeSeconds=wait,
        )
        return list(answer.get("Messages", []))

    def deliver(self, messages: list[dict[str, Any]], context: Any = None) -> list[str]:
        """Invoke the function with ``messages``; delete the successes; return the failed message ids."""
        self.invocations += 1
        answer = self.handler(sqs_event(messages, self.arn), context or LambdaContext())
        failed = {item["itemIdentifier"] for item in answer.get("batchItemFailures", [])}
        self.failures += len(failed)
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            self.client.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        return sorted(failed)

    def poll_once(self, wait: int = 0) -> int:
        """One poll: receive a batch and, if there was one, invoke the function with it."""
        messages = self.receive(wait)
        if messages:
            self.deliver(messages)
        return len(messages)

    def drain(self, *, idle_polls: int = 3, wait: int = 1) -> int:
        """Poll (long polls of ``wait`` seconds) until the queue has given nothing ``idle_polls`` times in a
        row; returns the records delivered."""
        delivered, idle = 0, 0
        while idle < idle_polls:
            got = self.poll_once(wait)
            delivered += got
            idle = 0 if got else idle + 1
        return delivered
