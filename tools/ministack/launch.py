"""MiniStack (tools/ministack/requirements.txt), started for the tests with these changes made in memory:

1. **SAM's ``Method: ANY`` routes.** MiniStack 1.5.33 imports an API's OpenAPI body with the methods
   ``get post put delete patch head options`` only (``ministack.services.apigateway_v1``,
   ``_OPENAPI_HTTP_METHODS``), so the ``x-amazon-apigateway-any-method`` operations SAM writes for
   ``Method: ANY`` are dropped and ``/{proxy+}`` answers 403 "Missing Authentication Token". The operation
   is imported as ``ANY``, as API Gateway does.
2. **Time, for schedules only.** A rule's ``rate(N minutes)`` fires every N * 60 / ``MS_RATE_DIVISOR``
   seconds, and the scheduler sweeps every ``MS_SCHED_TICK`` seconds (10 in MiniStack), so that a test sees
   the deployed ``rate(1 minute)`` rule fire in seconds rather than minutes (EventBridge Scheduler's
   ``rate()`` schedules too: they share the parser). Nothing else is sped up.
3. **DeleteMessageBatch in one pass.** MiniStack 1.5.33 rebuilds the queue's message list once per entry
   (``ministack.services.sqs``, ``_act_delete_message_batch``): a call's cost grows with the entries times
   the messages the queue holds, which under the throughput emulation is most of MiniStack's work. Here one
   pass removes every entry's message; the answer is the same, entry by entry (a receipt handle that
   matches nothing, or a second entry with one already used, fails as ``ReceiptHandleIsInvalid``).

4. **The HTTP server, for the throughput emulation only** (``MS_SERVER=uvicorn``): MiniStack's ASGI app
   under uvicorn with httptools instead of its own Hypercorn, whose pure-Python h11 parser would make the
   emulator's CPU, not ticklock's, what the throughput emulation measures. The app, its lifespan
   (background workers) and every service are MiniStack's; only the transport differs. The deployed-stack
   tests keep Hypercorn, as a user runs MiniStack.

5. **A layer unpacked once, shared by the environments.** MiniStack 1.5.33 unpacks a function's code and
   every layer into a fresh directory at each cold start (``ministack.core.lambda_runtime``,
   ``Worker._spawn``), inside its own process: ticklock's layer is thousands of files, and thirty runner
   environments starting at once for a burst can keep MiniStack's interpreter busy for minutes, long
   enough for the fires' claims to lapse on the queue before a runner comes up. On AWS a layer is
   mounted read-only at ``/opt`` and environments start side by side on their own hosts. Here an archive
   is unpacked once per content (sha-256) under the emulator's ``TMPDIR`` and each environment's directory
   gets symbolic links to its top-level entries; an environment still gets its own directory, so what
   MiniStack writes there (its context shim) stays its own.

Run with the MiniStack venv's interpreter: ``python tools/ministack/launch.py`` (its settings by
environment: ``GATEWAY_PORT``, ``BIND_HOST``...).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import types
import zipfile
from typing import Any

import ministack.core.lambda_runtime as lambda_runtime
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


class _SharedZipFile(zipfile.ZipFile):
    """``extractall(path)`` as links into one unpacked copy per archive content (change 5)."""

    _locks: dict[str, threading.Lock] = {}
    _guard = threading.Lock()

    def extractall(self, path: Any = None, members: Any = None, pwd: Any = None) -> None:
        if path is None or members is not None or pwd is not None or not isinstance(self.filename, str):
            return super().extractall(path, members, pwd)
        digest = hashlib.sha256()
        with open(self.filename, "rb") as archive:
            for chunk in iter(lambda: archive.read(1 << 20), b""):
                digest.update(chunk)
        key = digest.hexdigest()
        shared = os.path.join(tempfile.gettempdir(), "ministack-unpacked", key)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if not os.path.isdir(shared):
                partial = f"{shared}.partial"
                shutil.rmtree(partial, ignore_errors=True)
                super().extractall(partial)
                os.replace(partial, shared)
        for entry in os.listdir(shared):
            os.symlink(os.path.join(shared, entry), os.path.join(os.fspath(path), entry))


_zipfile_shared = types.ModuleType("zipfile")
_zipfile_shared.__dict__.update(zipfile.__dict__)
_zipfile_shared.ZipFile = _SharedZipFile  # type: ignore[attr-defined]
lambda_runtime.zipfile = _zipfile_shared  # type: ignore[attr-defined]

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
