"""API function: an API Gateway REST (proxy) request -> the job API, the same routes as ``ticklock serve``."""

from typing import Any

from ticklock.runtimes.aws import api, container


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, context, container())
