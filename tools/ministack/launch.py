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
3. **DeleteMessageBatch in one pass.** MiniStack 1.5.33 rebuilds the queue's message list once per entry
   (``services/sqs.py``, ``_act_delete_message_batch``): ten entries against the ~600 messages a queue holds
   at 1,000 fires/s cost ~6,000 steps a call, most of MiniStack's CPU in the throughput emulation. Here one
   pass removes every entry's message; the answer is the same, entry by entry (a receipt handle that
   matches nothing, or a second entry with one already used, fails as ``ReceiptHandleIsInvalid``).

4. **The HTTP server, for the throughput emulation only** (``MS_SERVER=uvicorn``): MiniStack's ASGI app
   under uvicorn with httptools instead of its own Hypercorn (whose pure-Python h11 parser cost ~1 ms of
   CPU a request: a third of a core at the ~300 SQS calls/s of 1,000 fires/s). The app, its lifespan
   (background workers) and every service are MiniStack's; only the transport differs. The deployed-stack
   tests keep Hypercorn, as a user runs MiniStack.

Run with the MiniStack venv's interpreter: ``python tools/ministack/launch.py`` (its settings by
environment: ``GATEWAY_PORT``, ``BIND_HOST``...).
"""

from __future__ import annotations

import os

import ministack.services.apigateway_v1 as apigateway
import ministack.services.eventbridge as eventbridge
import ministack.services.sqs as sqs

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


def _delete_message_batch(data: dict[str, object], qurl: str) -> dict[str, object]:
    q = sqs._get_q(data.get("QueueUrl", qurl), "sqs:DeleteMessage")
    entries = data.get("Entries", [])
    sqs._validate_batch_entries(entries, "DeleteMessageBatch" + "RequestEntry")
    wanted: dict[str, str] = {}  # receipt handle -> the first entry naming it
    for entry in entries:
        wanted.setdefault(entry.get("ReceiptHandle", ""), entry.get("Id", ""))
    found: set[str] = set()
    kept = []
    for m in q["messages"]:
        handle = m["receipt_handle"]
        if handle is not None and handle in wanted:
            found.add(handle)
        else:
            kept.append(m)
    q["messages"] = kept
    ok, fail = [], []
    for entry in entries:
        eid, handle = entry.get("Id", ""), entry.get("ReceiptHandle", "")
        if handle in found and wanted[handle] == eid:
            ok.append({"Id": eid})
        else:
            fail.append({"Id": eid, "Code": "ReceiptHandleIsInvalid", "Message": "The input receipt handle is invalid.",
                         "SenderFault": True})  # fmt: skip
    return {"Successful": ok, "Failed": fail}


sqs._HANDLERS["DeleteMessageBatch"] = _delete_message_batch

if __name__ == "__main__":
    if os.environ.get("MS_SERVER") == "uvicorn":
        import uvicorn

        uvicorn.run(
            "ministack.app:app",
            host=os.environ.get("BIND_HOST", "127.0.0.1"),
            port=int(os.environ.get("GATEWAY_PORT", "4566")),
            http="httptools",
            loop="uvloop",
            lifespan="on",
            access_log=False,
            log_level="warning",
            timeout_keep_alive=75,  # as MiniStack's Hypercorn (uvicorn's own is 5 s)
        )
    else:
        from ministack.app import main

        main()
