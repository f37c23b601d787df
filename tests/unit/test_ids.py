"""Ids: 32 hex digits in UUIDv7's layout, sorting by the millisecond they were made in."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from ticklock.domain.ids import new_id


def test_an_id_is_a_version_7_uuid_of_this_millisecond() -> None:
    before = time.time_ns() // 1_000_000
    made = new_id()
    after = time.time_ns() // 1_000_000
    assert len(made) == 32 and int(made, 16) >= 0
    parsed = uuid.UUID(hex=made)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert before <= int(made[:12], 16) <= after


def test_ids_sort_by_the_millisecond_and_never_repeat() -> None:
    made: list[str] = []
    for _ in range(5):
        made.extend(new_id() for _ in range(2000))
        time.sleep(0.002)
    assert len(set(made)) == len(made)
    stamps = [int(i[:12], 16) for i in made]
    assert stamps == sorted(stamps)
    assert sorted(made, key=lambda i: i[:12]) == made


def made_in_threads(make: Callable[[], str], threads: int, each: int) -> list[str]:
    """``each`` values made by ``make`` on each of ``threads`` threads running at once."""
    made: list[list[str]] = [[] for _ in range(threads)]
    running = [threading.Thread(target=lambda into=bucket: into.extend(make() for _ in range(each))) for bucket in made]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return [value for bucket in made for value in bucket]


def test_ids_made_in_threads_at_once_never_repeat() -> None:
    every = made_in_threads(new_id, 8, 5000)
    assert len(set(every)) == len(every) == 40_000
    assert len({i[12:] for i in every}) == len(every)  # the random parts alone differ too


def test_a_forked_child_draws_ids_of_its_own() -> None:
    """A forked child must not go on with any random state of the parent's, or its next id would be the
    parent's next id."""
    import os

    new_id()  # whatever state making an id leaves is made before the fork
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    theirs = os.read(read, 64).decode()
    os.close(read)
    ours = new_id()
    assert len(theirs) == 32
    assert theirs[12:] != ours[12:]


def test_tokens_are_24_hex_digits_and_never_repeat_across_threads() -> None:
    from ticklock.domain.ids import new_token

    def token() -> str:
        made = new_token()
        new_id()  # ids drawn from the same source between tokens
        return made

    tokens = made_in_threads(token, 8, 5000)
    assert all(len(t) == 24 and int(t, 16) >= 0 for t in tokens)
    assert len(set(tokens)) == len(tokens) == 40_000
