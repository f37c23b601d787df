"""Calling one handler attempt under a deadline, without ever wedging the caller.

* Async handlers run on one shared event loop thread and are cancelled at the deadline.
* Sync handlers run on a thread of their own. Python cannot kill a thread, so at the deadline the
  caller stops waiting, reports TIMEOUT and sets ``ctx.cancelled``; a handler that ignores it keeps
  running until it returns, counted in ``abandoned`` (the ``ticklock_handler_threads_abandoned``
  gauge) - the worker that called it is free at once, so the pool never wedges.
* ``interrupt_all`` (shutdown after the grace period) makes every waiting call return INTERRUPTED.
"""

from __future__ import annotations

import asyncio
import enum
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ticklock.domain.handlers import Handler, HandlerContext


class AttemptKind(enum.Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class AttemptResult:
    kind: AttemptKind
    error: str | None = None
    abandoned: bool = False  # a sync handler's thread is still running past the deadline


class _Call:
    __slots__ = ("abandoned", "done", "error", "finished", "interrupted", "kind")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.kind = AttemptKind.OK
        self.error: str | None = None
        self.interrupted = False
        self.finished = False  # set by the handler's thread, under the invoker's lock
        self.abandoned = False  # set by the caller at the deadline, under the invoker's lock


class _Runner:
    """A reusable thread for sync handlers: starting a thread per attempt cost ~150 us of CPU a fire."""

    def __init__(self, invoker: Invoker) -> None:
        self.invoker = invoker
        self.inbox: queue.SimpleQueue[tuple[Callable[[HandlerContext], Any], HandlerContext, _Call] | None] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._loop, name="ticklock-handler", daemon=True).start()

    def _loop(self) -> None:
        while True:
            item = self.inbox.get()
            if item is None:
                return
            func, ctx, call = item
            try:
                func(ctx)
            except BaseException as exc:  # noqa: BLE001 - a handler may raise anything
                call.kind, call.error = AttemptKind.ERROR, describe(exc)
            if not self.invoker._returned(self, call):
                return


class _HandlerTimeout(Exception):
    def __init__(self, original: TimeoutError) -> None:
        super().__init__(str(original))
        self.original = original


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Invoker:
    """Runs handler attempts; owns the event loop thread for async handlers."""

    def __init__(self, *, max_idle_threads: int = 64) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="ticklock-async", daemon=True)
        self._loop_thread.start()
        self._lock = threading.Lock()
        self._inflight: set[_Call] = set()
        self._idle: list[_Runner] = []
        self._max_idle = max_idle_threads
        self._closed = False
        self._abandoned = 0
        self.on_abandoned: Callable[[int], None] = lambda count: None

    @property
    def abandoned(self) -> int:
        """Sync handler threads still running past their deadline."""
        with self._lock:
            return self._abandoned

    def call(self, handler: Handler, ctx: HandlerContext, timeout: float, *, grace: float = 0.0) -> AttemptResult:
        """Run one attempt for at most ``timeout`` seconds. With ``grace``, a sync handler still running
        then is told (``ctx.cancelled``) and given that long to return before it is abandoned."""
        call = _Call()
        with self._lock:
            self._inflight.add(call)
        try:
            if handler.is_async:
                return self._call_async(handler, ctx, timeout, call)
            return self._call_sync(handler, ctx, timeout, call, grace)
        finally:
            with self._lock:
                self._inflight.discard(call)

    def interrupt_all(self) -> None:
        """Make every call in flight return INTERRUPTED now (their handlers see ``cancelled``)."""
        with self._lock:
            calls = list(self._inflight)
        for call in calls:
            call.interrupted = True
            call.done.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for runner in idle:
            runner.inbox.put(None)
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(timeout=5)
        if not self._loop_thread.is_alive():
            self._loop.close()

    # -- sync -----------------------------------------------------------------------------------------
    def _call_sync(
        self, handler: Handler, ctx: HandlerContext, timeout: float, call: _Call, grace: float
    ) -> AttemptResult:
        with self._lock:
            runner = self._idle.pop() if self._idle else None
        (runner or _Runner(self)).inbox.put((handler.func, ctx, call))
        told = not call.done.wait(timeout) and grace > 0 and not call.interrupted
        if told:
            ctx.cancelled.set()  # told to stop, and given ``grace`` to do so
            call.done.wait(grace)
        with self._lock:
            if call.finished and told:  # it stopped when told: past its time, but nothing is left running
                return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
            if call.finished:
                return AttemptResult(call.kind, call.error)
            call.abandoned = True
            self._abandoned += 1
            count = self._abandoned
        ctx.cancelled.set()
        self.on_abandoned(count)
        if call.interrupted:
            return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown", abandoned=True)
        return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s", abandoned=True)

    def _returned(self, runner: _Runner, call: _Call) -> bool:
        """A handler returned on ``runner``: wake its caller, and keep the thread for the next call."""
        with self._lock:
            call.finished = True
            was_abandoned = call.abandoned
            if was_abandoned:
                self._abandoned -= 1
            count = self._abandoned
            keep = not self._closed and len(self._idle) < self._max_idle
            if keep:
                self._idle.append(runner)
        call.done.set()
        if was_abandoned:
            self.on_abandoned(count)
        return keep

    # -- async ----------------------------------------------------------------------------------------
    def _call_async(self, handler: Handler, ctx: HandlerContext, timeout: float, call: _Call) -> AttemptResult:
        async def own() -> Any:
            try:
                return await handler.func(ctx)
            except TimeoutError as exc:
                # keep the handler's own TimeoutError apart from wait_for's deadline
                raise _HandlerTimeout(exc) from exc

        async def guarded() -> Any:
            return await asyncio.wait_for(own(), timeout)

        future: Future[Any] = asyncio.run_coroutine_threadsafe(guarded(), self._loop)
        future.add_done_callback(lambda _f: call.done.set())
        # wait_for cancels at the deadline; the extra second covers a handler slow to unwind.
        call.done.wait(timeout + 1.0)
        if call.interrupted and not future.done():
            ctx.cancelled.set()
            future.cancel()
            return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown")
        if not future.done():
            ctx.cancelled.set()
            future.cancel()
            return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
        try:
            future.result()
        except _HandlerTimeout as exc:
            return AttemptResult(AttemptKind.ERROR, describe(exc.original))
        except TimeoutError:
            ctx.cancelled.set()
            return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
        except BaseException as exc:  # noqa: BLE001 - a handler may raise anything
            return AttemptResult(AttemptKind.ERROR, describe(exc))
        return AttemptResult(AttemptKind.OK)
