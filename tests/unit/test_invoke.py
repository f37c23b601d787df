"""The Invoker: real threads and a real event loop, short timeouts, no wedging."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.support import waiting
from ticklock.engine.invoke import AttemptKind, AttemptResult, Invoker
from ticklock.handlers.contract import Handler, HandlerContext, HandlerFunc

CtxFactory = Callable[..., HandlerContext]


def handler(name: str, func: HandlerFunc) -> Handler:
    return Handler(name=name, func=func, description="", origin=f"tests.{name}")


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    return waiting.wait_until(condition, timeout)


def call_in_thread(
    invoker: Invoker, h: Handler, ctx: HandlerContext, timeout: float
) -> tuple[threading.Thread, list[AttemptResult]]:
    results: list[AttemptResult] = []
    thread = threading.Thread(target=lambda: results.append(invoker.call(h, ctx, timeout)), daemon=True)
    thread.start()
    return thread, results


# -- sync -------------------------------------------------------------------------------------------------


def test_sync_success(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    seen: list[Any] = []

    def ok(ctx: HandlerContext) -> str:
        seen.append(ctx.payload["x"])
        seen.append(threading.current_thread().name)
        return "ignored"

    ctx = ctx_factory(payload={"x": 42})
    result = invoker.call(handler("ok", ok), ctx, 0.5)
    assert result == AttemptResult(AttemptKind.OK)
    assert seen[0] == 42
    assert seen[1] != threading.current_thread().name  # ran on a thread of its own
    assert not ctx.cancelled.is_set()
    assert invoker.abandoned == 0


def test_sync_exception_text(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    def bad(ctx: HandlerContext) -> None:
        raise RuntimeError("disk on fire")

    result = invoker.call(handler("bad", bad), ctx_factory(), 0.5)
    assert result.kind is AttemptKind.ERROR
    assert result.error == "RuntimeError: disk on fire"


def test_sync_exception_without_text_names_the_type(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    def bad(ctx: HandlerContext) -> None:
        raise KeyError

    result = invoker.call(handler("bad", bad), ctx_factory(), 0.5)
    assert result.kind is AttemptKind.ERROR
    assert result.error == "KeyError"


def test_sync_base_exception_is_an_error_not_a_crash(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    def exits(ctx: HandlerContext) -> None:
        raise SystemExit("bye")

    result = invoker.call(handler("exits", exits), ctx_factory(), 0.5)
    assert result.kind is AttemptKind.ERROR
    assert result.error is not None
    assert "SystemExit" in result.error


def test_sync_handler_ignoring_its_deadline_times_out_without_wedging(
    invoker: Invoker, ctx_factory: CtxFactory
) -> None:
    release = threading.Event()
    started = threading.Event()
    threads: list[threading.Thread] = []

    def stubborn(ctx: HandlerContext) -> None:
        threads.append(threading.current_thread())
        started.set()
        release.wait(2.0)  # ignores ctx.cancelled: up to 2 s past a 0.2 s timeout

    counts: list[int] = []
    invoker.on_abandoned = counts.append
    ctx = ctx_factory(seconds=0.2)
    begun = time.monotonic()
    result = invoker.call(handler("stubborn", stubborn), ctx, 0.2)
    elapsed = time.monotonic() - begun
    try:
        assert result.kind is AttemptKind.TIMEOUT
        assert result.error is not None
        assert "0.2" in result.error
        assert started.is_set()
        assert threads[0].is_alive()  # the call returned while the handler is still running
        assert elapsed < 1.5
        assert ctx.cancelled.is_set()
        assert invoker.abandoned == 1
        assert counts == [1]
    finally:
        release.set()
    assert wait_until(lambda: invoker.abandoned == 0)
    assert wait_until(lambda: counts == [1, 0])
    # once the straggler returns, its thread serves the next call instead of a new one being started
    assert invoker.call(handler("stubborn", stubborn), ctx_factory(seconds=5), 5).kind is AttemptKind.OK
    assert threads[1] is threads[0]


def test_sync_sleeping_handler_times_out_promptly(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    threads: list[threading.Thread] = []

    def sleeper(ctx: HandlerContext) -> None:
        threads.append(threading.current_thread())
        time.sleep(2.0)

    begun = time.monotonic()
    result = invoker.call(handler("sleeper", sleeper), ctx_factory(seconds=0.2), 0.2)
    assert result.kind is AttemptKind.TIMEOUT
    assert time.monotonic() - begun < 1.5
    assert threads[0].is_alive()
    assert invoker.abandoned == 1
    # the worker is free: another call completes while the sleeper still runs
    assert invoker.call(handler("ok", lambda ctx: None), ctx_factory(), 0.5).kind is AttemptKind.OK
    assert wait_until(lambda: invoker.abandoned == 0, timeout=5.0)


def test_sync_cooperative_handler_sees_cancelled(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    stopped = threading.Event()

    def polite(ctx: HandlerContext) -> None:
        if ctx.cancelled.wait(3.0):
            stopped.set()

    result = invoker.call(handler("polite", polite), ctx_factory(seconds=0.2), 0.2)
    assert result.kind is AttemptKind.TIMEOUT
    assert stopped.wait(2.0)
    assert wait_until(lambda: invoker.abandoned == 0)


def test_several_abandoned_threads_are_counted(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    release = threading.Event()

    def stubborn(ctx: HandlerContext) -> None:
        release.wait(3.0)

    try:
        for _ in range(3):
            assert invoker.call(handler("stubborn", stubborn), ctx_factory(), 0.2).kind is AttemptKind.TIMEOUT
        assert invoker.abandoned == 3
    finally:
        release.set()
    assert wait_until(lambda: invoker.abandoned == 0)


# -- async ------------------------------------------------------------------------------------------------


def test_async_success(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    seen: list[Any] = []

    async def ok(ctx: HandlerContext) -> None:
        await asyncio.sleep(0.01)
        seen.append(ctx.payload["x"])

    h = handler("aok", ok)
    assert h.is_async
    ctx = ctx_factory(payload={"x": "y"})
    assert invoker.call(h, ctx, 0.5) == AttemptResult(AttemptKind.OK)
    assert seen == ["y"]
    assert not ctx.cancelled.is_set()


def test_async_exception_text(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    async def bad(ctx: HandlerContext) -> None:
        await asyncio.sleep(0)
        raise ValueError("no such host")

    result = invoker.call(handler("abad", bad), ctx_factory(), 0.5)
    assert result.kind is AttemptKind.ERROR
    assert result.error == "ValueError: no such host"


def test_async_handler_raising_its_own_timeout_error_is_an_error(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    """A TimeoutError raised by the handler itself (say an inner asyncio.timeout) long before the
    deadline is a handler failure with its own text - as it is for a sync handler - not the invoker's
    TIMEOUT, which would stop retries and report a deadline that never passed."""

    async def inner_timeout(ctx: HandlerContext) -> None:
        raise TimeoutError("upstream took too long")

    def sync_inner_timeout(ctx: HandlerContext) -> None:
        raise TimeoutError("upstream took too long")

    sync_result = invoker.call(handler("sync", sync_inner_timeout), ctx_factory(), 2.0)
    assert sync_result == AttemptResult(AttemptKind.ERROR, "TimeoutError: upstream took too long")
    ctx = ctx_factory()
    result = invoker.call(handler("async", inner_timeout), ctx, 2.0)
    assert result == AttemptResult(AttemptKind.ERROR, "TimeoutError: upstream took too long")
    assert not ctx.cancelled.is_set()


def test_async_timeout_cancels_the_coroutine(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    finally_ran = threading.Event()
    cancelled_seen = threading.Event()
    after_sleep = threading.Event()

    async def slow(ctx: HandlerContext) -> None:
        try:
            await asyncio.sleep(5)
            after_sleep.set()
        except asyncio.CancelledError:
            cancelled_seen.set()
            raise
        finally:
            finally_ran.set()

    ctx = ctx_factory(seconds=0.2)
    begun = time.monotonic()
    result = invoker.call(handler("aslow", slow), ctx, 0.2)
    assert result.kind is AttemptKind.TIMEOUT
    assert result.error is not None
    assert "0.2" in result.error
    assert time.monotonic() - begun < 2.0
    assert finally_ran.wait(1.0)
    assert cancelled_seen.is_set()
    assert not after_sleep.is_set()
    assert ctx.cancelled.is_set()
    assert invoker.abandoned == 0  # async handlers are cancelled for real, never abandoned


def test_async_timeout_does_not_block_other_async_handlers(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    async def slow(ctx: HandlerContext) -> None:
        await asyncio.sleep(5)

    async def ok(ctx: HandlerContext) -> None:
        await asyncio.sleep(0.01)

    thread, results = call_in_thread(invoker, handler("aslow", slow), ctx_factory(), 0.5)
    assert invoker.call(handler("aok", ok), ctx_factory(), 0.3).kind is AttemptKind.OK
    thread.join(3.0)
    assert results and results[0].kind is AttemptKind.TIMEOUT


# -- interrupt_all ----------------------------------------------------------------------------------------


def test_interrupt_all_returns_interrupted_for_a_waiting_sync_call(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    started = threading.Event()
    release = threading.Event()

    def busy(ctx: HandlerContext) -> None:
        started.set()
        release.wait(5.0)

    ctx = ctx_factory(seconds=10)
    thread, results = call_in_thread(invoker, handler("busy", busy), ctx, 10.0)
    try:
        assert started.wait(2.0)
        invoker.interrupt_all()
        thread.join(2.0)
        assert not thread.is_alive()  # returned long before its 10 s timeout
        assert results[0].kind is AttemptKind.INTERRUPTED
        assert ctx.cancelled.is_set()
    finally:
        release.set()
    assert wait_until(lambda: invoker.abandoned == 0)


def test_interrupt_all_returns_interrupted_for_a_waiting_async_call(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    started = threading.Event()
    finally_ran = threading.Event()

    async def busy(ctx: HandlerContext) -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            finally_ran.set()

    ctx = ctx_factory(seconds=10)
    thread, results = call_in_thread(invoker, handler("abusy", busy), ctx, 10.0)
    assert started.wait(2.0)
    invoker.interrupt_all()
    thread.join(2.0)
    assert not thread.is_alive()
    assert results[0].kind is AttemptKind.INTERRUPTED
    assert ctx.cancelled.is_set()
    assert finally_ran.wait(2.0)


def test_interrupt_all_with_nothing_in_flight_is_harmless(invoker: Invoker, ctx_factory: CtxFactory) -> None:
    invoker.interrupt_all()
    assert invoker.call(handler("ok", lambda ctx: None), ctx_factory(), 0.5).kind is AttemptKind.OK


def test_handler_context_remaining_is_never_negative(ctx_factory: CtxFactory) -> None:
    assert 0.0 < ctx_factory(seconds=5).remaining() <= 5.0
    assert ctx_factory(seconds=-5).remaining() == 0.0


def test_a_contexts_cancelled_is_one_event_whichever_threads_ask_first(ctx_factory: CtxFactory) -> None:
    # made on first use: threads asking at once all get the same event, so a set() is seen by every waiter
    for _ in range(50):
        ctx, seen = ctx_factory(), list[threading.Event]()
        start = threading.Barrier(8)

        def ask(
            ctx: HandlerContext = ctx, seen: list[threading.Event] = seen, start: threading.Barrier = start
        ) -> None:
            start.wait()
            seen.append(ctx.cancelled)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and all(event is seen[0] for event in seen) and ctx.cancelled is seen[0]
        seen[0].set()
        assert ctx.cancelled.is_set()


# -- inline (sync handlers on the caller's thread, a watchdog keeping the deadline) -------------------------


class TakeOvers:
    """A ``take_over`` that records what it was given, and on which thread."""

    def __init__(self) -> None:
        self.results: list[AttemptResult] = []
        self.threads: list[threading.Thread] = []
        self.called = threading.Event()

    def __call__(self, result: AttemptResult) -> None:
        self.results.append(result)
        self.threads.append(threading.current_thread())
        self.called.set()


def inline_in_thread(
    invoker: Invoker, h: Handler, ctx: HandlerContext, timeout: float, take_over: TakeOvers, grace: float = 0.0
) -> tuple[threading.Thread, list[AttemptResult]]:
    results: list[AttemptResult] = []
    thread = threading.Thread(
        target=lambda: results.append(invoker.call(h, ctx, timeout, grace=grace, take_over=take_over)), daemon=True
    )
    thread.start()
    return thread, results


def test_inline_sync_handlers_run_on_the_callers_thread(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    seen: list[threading.Thread] = []
    take_over = TakeOvers()
    try:
        here = handler("ok", lambda ctx: seen.append(threading.current_thread()))
        ok = invoker.call(here, ctx_factory(), 5, take_over=take_over)
        failed = invoker.call(handler("bad", lambda ctx: 1 / 0), ctx_factory(), 5, take_over=take_over)
        assert ok == AttemptResult(AttemptKind.OK)
        assert failed.kind is AttemptKind.ERROR and failed.error == "ZeroDivisionError: division by zero"
        assert seen == [threading.current_thread()]
        # without a take_over (a caller that cannot hand its fire on) the handler runs on a thread of its own
        invoker.call(handler("ok", lambda ctx: seen.append(threading.current_thread())), ctx_factory(), 5)
        assert seen[1] is not threading.current_thread()
        assert take_over.results == []
    finally:
        invoker.close()


def test_an_inline_handler_past_its_deadline_is_taken_over_while_it_runs(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    release = threading.Event()
    stuck: list[threading.Thread] = []
    counts: list[int] = []
    invoker.on_stuck = stuck.append
    invoker.on_abandoned = counts.append
    take_over = TakeOvers()
    ctx = ctx_factory(seconds=0.2)
    thread, results = inline_in_thread(invoker, handler("stubborn", lambda c: release.wait(10)), ctx, 0.2, take_over)
    try:
        assert take_over.called.wait(5)  # the fire is finished for it, at the deadline
        [result] = take_over.results
        assert result.kind is AttemptKind.TIMEOUT and result.abandoned and "0.2" in (result.error or "")
        assert take_over.threads[0] is not thread  # on a thread of its own: the caller is still in the handler
        assert thread.is_alive() and results == []
        assert wait_until(lambda: stuck == [thread])  # its caller's thread is reported, to be replaced
        assert ctx.cancelled.is_set()
        assert invoker.abandoned == 1 and counts == [1]
    finally:
        release.set()
    thread.join(5)
    # the straggler's own result is for nobody: the caller is told so, and does nothing more
    assert results[0].taken_over and results[0].abandoned
    assert invoker.abandoned == 0 and counts == [1, 0]
    assert len(take_over.results) == 1
    invoker.close()


def test_an_inline_handler_that_stops_when_told_is_a_timeout_not_taken_over(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    take_over = TakeOvers()
    stopped = threading.Event()

    def polite(ctx: HandlerContext) -> None:
        if ctx.cancelled.wait(5):
            stopped.set()

    try:
        result = invoker.call(handler("polite", polite), ctx_factory(seconds=0.2), 0.2, grace=3.0, take_over=take_over)
        assert stopped.is_set()
        assert result.kind is AttemptKind.TIMEOUT and not result.abandoned and not result.taken_over
        assert take_over.results == [] and invoker.abandoned == 0
    finally:
        invoker.close()


def test_interrupt_all_hands_an_inline_call_to_its_take_over_as_interrupted(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    take_over = TakeOvers()
    started, release = threading.Event(), threading.Event()

    def busy(ctx: HandlerContext) -> None:
        started.set()
        release.wait(10)

    thread, results = inline_in_thread(invoker, handler("busy", busy), ctx_factory(seconds=30), 30.0, take_over)
    try:
        assert started.wait(5)
        invoker.interrupt_all()
        assert take_over.called.wait(5)
        assert take_over.results[0].kind is AttemptKind.INTERRUPTED and take_over.results[0].abandoned
    finally:
        release.set()
    thread.join(5)
    assert results[0].taken_over
    invoker.close()


def test_close_waits_for_the_take_overs_still_finishing_fires(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    release, finishing, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_take_over(result: AttemptResult) -> None:
        finishing.set()
        time.sleep(0.3)  # a store write that takes a while
        finished.set()

    stubborn = handler("stubborn", lambda c: release.wait(10))
    thread = threading.Thread(
        target=lambda: invoker.call(stubborn, ctx_factory(), 0.1, take_over=slow_take_over), daemon=True
    )
    thread.start()
    try:
        assert finishing.wait(5)
        invoker.close()
        assert finished.is_set()
    finally:
        release.set()
    thread.join(5)


def test_the_watchdog_forgets_calls_that_ended(ctx_factory: CtxFactory) -> None:
    # each call's deadline (a job's timeout: a minute by default) outlives the call by far; the watchdog
    # must not hold every finished call (and its context) until then
    invoker = Invoker(inline=True)
    take_over = TakeOvers()
    try:
        for _ in range(2_000):
            invoker.call(handler("ok", lambda ctx: None), ctx_factory(seconds=60), 60.0, take_over=take_over)
        assert len(invoker._watched) <= 4 * 1 + 64 + 1
    finally:
        invoker.close()


def test_a_straggler_returns_only_once_its_thread_is_reported_stuck(ctx_factory: CtxFactory) -> None:
    # else its worker could take another fire before the pool retires it (and the pool would lose track)
    invoker = Invoker(inline=True)
    reported = threading.Event()

    def slow_report(thread: threading.Thread) -> None:
        time.sleep(0.3)
        reported.set()

    invoker.on_stuck = slow_report
    polite = handler("polite", lambda ctx: ctx.cancelled.wait(5))  # returns as soon as it is given up
    try:
        result = invoker.call(polite, ctx_factory(seconds=0.1), 0.1, take_over=TakeOvers())
        assert result.taken_over
        assert reported.is_set()
    finally:
        invoker.close()


def test_the_watchdog_outlives_a_failing_callback(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)

    def broken(thread: threading.Thread) -> None:
        raise RuntimeError("no thread to spare")

    invoker.on_stuck = broken
    release = threading.Event()
    stubborn = handler("stubborn", lambda ctx: release.wait(0.5))
    try:
        for _ in range(2):  # the second call is given up too: the watchdog still runs
            take_over = TakeOvers()
            result = invoker.call(stubborn, ctx_factory(seconds=0.05), 0.05, take_over=take_over)
            assert take_over.called.is_set() and result.taken_over
    finally:
        release.set()
        invoker.close()


def test_an_inline_call_after_interrupt_all_does_not_start(ctx_factory: CtxFactory) -> None:
    invoker = Invoker(inline=True)
    ran: list[bool] = []
    try:
        invoker.interrupt_all()
        result = invoker.call(handler("late", lambda ctx: ran.append(True)), ctx_factory(), 5, take_over=TakeOvers())
        assert result.kind is AttemptKind.INTERRUPTED and ran == []
    finally:
        invoker.close()


def test_an_inline_call_interrupted_as_it_starts_is_finished_once(ctx_factory: CtxFactory) -> None:
    """``interrupt_all`` between the call's entry in flight and its start: either its take-over finishes the
    fire and the call says so, or the call returns interrupted and no take-over runs; never both."""
    invoker = Invoker(inline=True)
    start = invoker._call_inline

    def interrupted_first(*args: Any) -> AttemptResult:
        invoker.interrupt_all()  # the shutdown comes in just as the call starts
        return start(*args)

    invoker._call_inline = interrupted_first  # type: ignore[method-assign,assignment]
    take_over, ran = TakeOvers(), []
    try:
        result = invoker.call(handler("late", lambda ctx: ran.append(True)), ctx_factory(), 5, take_over=take_over)
        assert ran == []
        assert result.kind is AttemptKind.INTERRUPTED
        if result.taken_over:
            assert take_over.called.wait(5) and len(take_over.results) == 1
        else:
            time.sleep(0.2)  # a take-over, if one were wrongly started, has had time to run
            assert take_over.results == []
    finally:
        invoker.close()
