"""MiniStack (tools/ministack/requirements.txt), started for the tests with two changes made in memory:

1. **SAM's ``Method: ANY`` routes.** MiniStack 1.5.33 imports an API's OpenAPI body with the methods
   ``get post put delete patch head options`` only (``services/apigateway_v1.py``,
   ``_OPENAPI_HTTP_METHODS``), so the ``x-amazon-apigateway-any-method`` operations SAM writes for
   ``Method: ANY`` are dropped and ``/{proxy+}`` answers 403 "Missing Authentication Token". The operation
   is imported as ``ANY``, as API Gateway does.
2. **Time, for schedules only.** A rule's ``rate(N minutes)`` fires every N * 60 / ``MS_RATE_DIVISOR``
   seconds, and the scheduler sweeps every ``MS_SCHED_TICK`` seconds (10 in MiniStack), so that a test sees
   the deployed ``rate(1 minute)`` rule fire in seconds rather than minutes (EventBridge Scheduler's
   ``rate()`` schedules too: they share the parser). Nothing else is sped up.

Run with the MiniStack venv's interpreter: ``python tools/ministack/launch.py`` (its settings by
environment: ``GATEWAY_PORT``, ``BIND_HOST``...).
"""

from __future__ import annotations

import os

import ministack.services.apigateway_v1 as apigateway
import ministack.services.eventbridge as eventbridge

ANY = "x-amazon-apigateway-any-method"

divisor = float(os.environ.get("MS_RATE_DIVISOR", "1"))
rate_seconds = eventbridge._parse_rate_seconds


def _sped_up(expr: str) -> float | None:
    seconds = rate_seconds(expr)
    return None if seconds is None else max(1.0, seconds / divisor)


eventbridge._parse_rate_seconds = _sped_up
eventbridge._SCHEDULER_TICK_INTERVAL = float(os.environ.get("MS_SCHED_TICK", "10"))

apigateway._OPENAPI_HTTP_METHODS = {*apigateway._OPENAPI_HTTP_METHODS, ANY}
import_operation = apigateway._import_operation


def _import_operation(api_id: str, resource_id: str, http_method: str, *args: object, **kwargs: object) -> object:
    return import_operation(api_id, resource_id, "ANY" if http_method == ANY.upper() else http_method, *args, **kwargs)


apigateway._import_operation = _import_operation

if __name__ == "__main__":
    from ministack.app import main

    main()
