"""How long each handler's runs take in this process: a worker takes the fires of quick handlers queued
one behind another together (``pool``), so that they share their store writes (``fire_path.run_all``);
one then waits for the others' runs, which is little only when they are quick."""

from __future__ import annotations

from collections.abc import Callable

from ticklock.domain.fire_rules import may_share
from ticklock.domain.fires import Fire

QUICK_RUNS, QUICK_SECONDS = 20, 0.002  # quick: a moving average of so many runs under so long


class HandlerSpeeds:
    """A moving average of each handler's runs here. Unlocked: a lost update between two workers costs one
    reading."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, float]] = {}  # handler: (runs timed, moving average of seconds)
        self._quick: dict[str, bool] = {}

    def note(self, handler: str, seconds: float) -> None:
        runs, average = self._seen.get(handler, (0, 0.0))
        average = seconds if not runs else average + (seconds - average) / 8
        self._seen[handler] = (runs + 1, average)
        self._quick[handler] = runs + 1 >= QUICK_RUNS and average < QUICK_SECONDS and seconds < 10 * QUICK_SECONDS

    def quick(self, handler: str) -> bool:
        return self._quick.get(handler, False)


def goes_with_others(speeds: HandlerSpeeds) -> Callable[[Fire], bool]:
    """Whether a fire may be taken with others: its handler is quick here, and nothing of it needs the fire
    alone (``domain.fire_rules.may_share``)."""
    return lambda fire: speeds.quick(fire.job.handler) and may_share(fire)
