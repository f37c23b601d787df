"""What building Job and Execution records costs, and what that is worth in a fire, old and new in one run.

Usage::

    .venv-engine/bin/python bench/records.py [--rounds 3] [--stored 20000] [--fires 8000]

Three variants of the same classes, swapped in place on ``Job`` and ``Execution`` so that every caller
(the stores' row readers, the fire path) builds through them:

* **exec init**: the ``__init__`` ticklock used to generate with ``exec``, which fills ``__dict__``
  directly (rebuilt here from its old source, as the "before");
* **dataclass init**: the frozen dataclass's own ``__init__`` (the code now);
* **dataclass init + replace**: as above, and ``with_changes`` through ``dataclasses.replace`` instead of
  copying ``__dict__`` (a candidate simplification, measured beside it).

Rows: the CPU to build one Job and one Execution, one ``with_changes`` of each, and the engine's CPU per
fire (``bench/fire_path.py``'s ``engine``, batch 1). Rounds alternate the variants. Nothing asserts here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import platform
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import machine_speed
from fire_path import engine

from ticklock.domain.executions import Execution
from ticklock.domain.fires import Trigger
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule


def exec_init(kind: type) -> Callable[..., None]:
    """The old generated initialiser of ``kind``: same signature, fields written to ``__dict__``."""
    params: list[str] = []
    lines: list[str] = []
    scope: dict[str, Any] = {"MISSING": dataclasses.MISSING, "__name__": kind.__module__}
    for f in dataclasses.fields(kind):
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=MISSING")
            lines.append(f"    if {f.name} is MISSING: {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        lines.append(f"    __direct_dict[{f.name!r}] = {f.name}")
    head = f"def __init__(__direct_self, {', '.join(params)}):\n    __direct_dict = __direct_self.__dict__\n"
    exec(head + "\n".join(lines), scope)  # the old mechanism, rebuilt to measure it
    init: Callable[..., None] = scope["__init__"]
    return init


def _replaced(self: Any, **changes: Any) -> Any:
    return dataclasses.replace(self, **changes)


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """Job and Execution as ``name`` builds and copies them, restored afterwards."""
    saved = {kind: (kind.__dict__["__init__"], kind.__dict__["with_changes"]) for kind in (Job, Execution)}
    try:
        for kind in (Job, Execution):
            if name == "exec init":
                kind.__init__ = exec_init(kind)  # type: ignore[method-assign]
            elif name == "dataclass init + replace":
                kind.with_changes = _replaced  # type: ignore[method-assign]
        yield
    finally:
        for kind, (init, changes) in saved.items():
            kind.__init__ = init  # type: ignore[method-assign]
            kind.with_changes = changes  # type: ignore[method-assign]


VARIANTS = ("exec init", "dataclass init", "dataclass init + replace")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOB: dict[str, Any] = {"id": "j", "name": "n", "handler": "noop", "schedule": IntervalSchedule(5), "payload": {},
                       "timeout": 3.0, "max_retries": 0, "enabled": True, "next_run_at": NOW, "created_at": NOW,
                       "updated_at": NOW, "version": 3}  # fmt: skip
EXECUTION: dict[str, Any] = {"id": "e", "job_id": "j", "fire_key": "k", "handler": "noop", "trigger": Trigger.SCHEDULE,
                             "scheduled_at": NOW, "started_at": NOW, "deadline_at": NOW, "run_token": "t",
                             "owner": "o", "attempts": 1}  # fmt: skip


def per_call(action: Callable[[], object], count: int = 100_000) -> float:
    """CPU µs of one call of ``action``, the best of five runs of ``count``."""
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        for _ in range(count):
            action()
        best = min(best, time.thread_time() - started)
    return best / count * 1e6


def micro() -> dict[str, float]:
    job, execution = Job(**JOB), Execution(**EXECUTION)
    return {
        "build a Job": per_call(lambda: Job(**JOB)),
        "build an Execution": per_call(lambda: Execution(**EXECUTION)),
        "Job.with_changes (one field)": per_call(lambda: job.with_changes(next_run_at=NOW)),
        "Execution.with_changes (three fields)": per_call(
            lambda: execution.with_changes(status="success", finished_at=NOW, duration=0.1)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stored", type=int, default=20_000)
    parser.add_argument("--fires", type=int, default=8_000)
    args = parser.parse_args()
    if args.rounds < 1 or args.stored < args.fires or args.fires < 100:
        parser.error("--rounds is at least 1, --fires at least 100 and --stored at least --fires")
    print(f"Python {platform.python_version()}, {platform.machine()}; "
          f"the machine's speed: {machine_speed():.2f} s (`machine_speed`)\n")  # fmt: skip
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.rounds):  # the variants alternate, so that each sees the machine's moments
        for name in VARIANTS:
            with variant(name):
                figures = micro()
                figures["engine, CPU per fire (batch 1)"] = engine(args.stored, args.fires, 1)
            for row, value in figures.items():
                rows.setdefault(row, {}).setdefault(name, []).append(value)
    print("| what | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for row, by_variant in rows.items():
        cells = [f"{min(by_variant[name]):.2f} µs" for name in VARIANTS]
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("\nEach cell: the best round. Engine rounds, in order:")
    for name in VARIANTS:
        each = ", ".join(f"{v:.0f}" for v in rows["engine, CPU per fire (batch 1)"][name])
        print(f"- {name}: {each} µs")


if __name__ == "__main__":
    main()
