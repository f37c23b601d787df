"""The FireQueue port's contract, run unchanged on the local pool (alone and taking fires together) and on an
SQS queue on MiniStack: every fire submitted ends as exactly one of delivered (once, whole), named by a
``QueueUnavailable``, or returned by ``drain_unstarted``.

Where the two differ the port says so and the case checks the rule for each: a bounded queue (the pool) makes
``submit`` wait while it is full; an unbounded one (SQS) never waits for room and reports the same room always.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable

import pytest

from tests.contract.queue.conftest import WAIT, Subject, make_fire
from ticklock.domain.fires import Fire
from ticklock.errors import QueueUnavailable

SOME = 25  # more than two SQS batches: some go out when a batch fills, the rest at flush


def identities(fires: Iterable[Fire]) -> Counter[tuple[str, str, str, str]]:
    """Each fire's job, slot, trigger and lease token, counted."""
    return Counter((f.job.id, f.scheduled_at.isoformat(), f.trigger.value, f.lease_token) for f in fires)


def fires(count: int, prefix: str = "job") -> list[Fire]:
    return [make_fire(f"{prefix}-{i}", i) for i in range(count)]


class InBackground:
    """``call`` on a thread of its own: whether it returned, and what it raised."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.returned = threading.Event()
        self.error: BaseException | None = None

        def target() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - kept for the test to judge
                self.error = exc
            self.returned.set()

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the call never returned"


def test_every_fire_submitted_is_delivered_once_as_it_was_submitted(subject: Subject) -> None:
    subject.release()
    handed = fires(SOME)
    for fire in handed:
        subject.queue.submit(fire)
    subject.queue.flush()
    got = subject.delivered(SOME)
    assert identities(got) == identities(handed)  # each once: same job, slot, trigger and lease token
    assert sorted(got, key=lambda f: f.key) == sorted(handed, key=lambda f: f.key)  # and the job whole


def test_flush_hands_over_what_was_buffered(subject: Subject) -> None:
    subject.release()
    few = fires(3)  # fewer than a batch: a buffering queue still holds them all
    for fire in few:
        subject.queue.submit(fire)
    subject.queue.flush()
    assert identities(subject.delivered(3)) == identities(few)


def test_free_slots_is_never_negative_and_shrinks_as_fires_wait(subject: Subject) -> None:
    running = subject.occupy()  # every consumer busy: what is submitted now waits
    room = [subject.queue.free_slots()]
    waiting = fires(subject.room or SOME)
    for fire in waiting:
        subject.queue.submit(fire)
        room.append(subject.queue.free_slots())
    assert min(room) >= 0
    if subject.room is not None:  # bounded: one less for each fire that waits, down to none
        assert room == list(range(subject.room, -1, -1))
    else:  # unbounded: the same room however many fires wait
        assert room[0] > 0 and set(room) == {room[0]}
    subject.queue.flush()
    assert identities(subject.delivered(len(running) + len(waiting))) == identities([*running, *waiting])


def test_a_full_queue_makes_submit_wait_until_there_is_room(subject: Subject) -> None:
    running = subject.occupy()
    if subject.room is None:
        # unbounded: submit never waits for room; with nothing consuming, every submit returns
        many = fires(3 * SOME)

        def submit_all() -> None:
            for fire in many:
                subject.queue.submit(fire)

        submits = InBackground(submit_all)
        submits.join()
        assert submits.error is None
        subject.queue.flush()
        assert identities(subject.delivered(len(many))) == identities(many)
        return
    full = fires(subject.room)
    for fire in full:
        subject.queue.submit(fire)
    assert subject.queue.free_slots() == 0
    last = make_fire("one-too-many")
    waits = InBackground(lambda: subject.queue.submit(last))
    assert not waits.returned.wait(0.5)  # still waiting for room (a correct queue waits for ever)
    got = subject.delivered(len(running) + len(full) + 1)  # the consumers run: room frees, the last gets in
    waits.join()
    assert waits.error is None
    assert identities(got) == identities([*running, *full, last])


def test_submit_after_drain_unstarted_raises_naming_the_fire(subject: Subject) -> None:
    subject.queue.drain_unstarted()
    late = make_fire("late")
    with pytest.raises(QueueUnavailable) as refused:
        subject.queue.submit(late)  # at once, not at a later flush: nothing is buffered for a drained queue
    assert refused.value.fires == [late]
    assert subject.delivered(0) == []


def test_drain_unstarted_returns_the_fires_not_started_and_none_is_lost_or_run_twice(subject: Subject) -> None:
    running = subject.occupy()
    queued = fires(subject.room or SOME - 10)  # SQS: one batch sent, the rest buffered
    for fire in queued:
        subject.queue.submit(fire)
    # and one more: a bounded queue is full, so this one waits for room until the drain refuses it
    last = make_fire("waiting")
    waits = InBackground(lambda: subject.queue.submit(last))
    if subject.room is not None:
        assert not waits.returned.wait(0.5)
    else:
        waits.join()
    drained = list(subject.queue.drain_unstarted())
    waits.join()
    refused = waits.error.fires if isinstance(waits.error, QueueUnavailable) else []
    assert waits.error is None or refused, f"submit raised {waits.error!r}"
    submitted = [*running, *queued, last]
    got = subject.delivered(len(submitted) - len(drained) - len(refused))
    assert drained and got, "the case needs fires both started and not"
    # each fire exactly once across delivered, drained and refused; none delivered twice
    assert identities([*got, *drained, *refused]) == identities(submitted)
    assert subject.queue.drain_unstarted() == []  # what was drained is the caller's now


def test_a_queue_that_cannot_hand_over_raises_naming_every_fire(subject: Subject) -> None:
    for queue in subject.unreachable():
        handed = fires(3)
        named: list[Fire] = []
        for fire in handed:
            try:
                queue.submit(fire)
            except QueueUnavailable as exc:
                named += exc.fires
        try:
            queue.flush()
        except QueueUnavailable as exc:
            named += exc.fires
        assert identities(named) == identities(handed), queue
        assert queue.drain_unstarted() == [], "a fire it named is still held"
