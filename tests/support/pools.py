"""The local pool's work, for tests that hand it fires one at a time."""

from __future__ import annotations

from collections.abc import Callable

from ticklock.domain.fires import Fire


def one_at_a_time(run: Callable[[Fire], object]) -> Callable[[list[Fire]], None]:
    """The pool's work (a list of fires) as ``run`` of each in turn."""

    def work(fires: list[Fire]) -> None:
        for fire in fires:
            run(fire)

    return work
