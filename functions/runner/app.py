"""Runner function: an SQS batch of fires -> the five steps, with partial batch failures."""

from typing import Any

from ticklock.runtimes.aws import container, run_batch


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run_batch(event, context, container())
