"""Tick function: fired by EventBridge once a minute, it ticks every second for that minute under a lease."""

from typing import Any

from ticklock.runtimes.aws import container, tick


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return tick(context, container())
