"""The SIGKILL scenario (tests/integration/test_crash_sigkill.py, bench/crash.py): every-second jobs whose
handler marks each run's start and end in files of its own (``crash_handler``), ``ticklock serve`` killed
with SIGKILL at random moments and started again at once, then what the marks say.

A fire that started twice must be explained by a kill: its earlier run was on the process killed, started
before the kill, and (where the store was read at the kill) its execution was still running then, i.e. the
run was cut off before its final write. The gap of a kill is, for each job, the time from the kill to the
job's next run on a live process.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from tests.support.crash_handler import NAME, slot_ms
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule
from ticklock.domain.service import JobSpec

ROOT = Path(__file__).resolve().parents[2]
NS = 1_000_000_000
Fire = tuple[str, int]  # (job name, slot in ms)


# -- the jobs -------------------------------------------------------------------------------------------
def every_second_jobs(
    count: int, folder: Path, *, first_at: datetime, timeout: float = JobSpec.timeout, prefix: str = "crash"
) -> list[Job]:
    """``count`` jobs on ``* * * * * *`` whose runs take 0.05 to 0.6 s (spread evenly), at the API's
    default timeout (unless ``timeout``) and retries, first due at ``first_at``."""
    now = datetime.now(UTC)
    jobs = []
    for i in range(count):
        seconds = round(0.05 + 0.55 * i / max(1, count - 1), 3)
        jobs.append(
            Job(
                id=uuid.uuid4().hex,
                name=f"{prefix}{i:03d}",
                handler=NAME,
                schedule=CronSchedule("* * * * * *"),
                payload={"dir": str(folder), "seconds": seconds},
                timeout=timeout,
                max_retries=JobSpec.max_retries,
                enabled=True,
                next_run_at=first_at,
                created_at=now,
                updated_at=now,
            )
        )
    return jobs


# -- the marks ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One run of a handler, as its marks tell it."""

    job: str
    slot: int  # ms
    start_ns: int
    pid: int
    stem: str
    ended: bool

    @property
    def fire(self) -> Fire:
        return (self.job, self.slot)


def read_runs(folder: Path) -> list[Run]:
    names = os.listdir(folder)
    ends = {n[: -len(".end")] for n in names if n.endswith(".end")}
    runs = []
    for name in names:
        if name.endswith(".start"):
            stem = name[: -len(".start")]
            job, slot, start, pid, _ = stem.split("~")
            runs.append(Run(job, int(slot), int(start), int(pid), stem, stem in ends))
    return runs


# -- the processes --------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_environ(**settings: str) -> dict[str, str]:
    """This process's environment without its TICKLOCK_* variables, plus the crash handler and ``settings``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TICKLOCK_")}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    environ["TICKLOCK_HANDLER_MODULES"] = "tests.support.crash_handler"
    # a line per fire, started and finished, so that a fire the test finds wrong can be found in the log
    environ["TICKLOCK_FIRE_LOG"] = "each"
    environ.update(settings)
    return environ


class Serve:
    """One ``ticklock serve`` process on its own port, its output appended to ``log``."""

    def __init__(self, environ: Mapping[str, str], log: Path, cwd: Path, python: str = sys.executable) -> None:
        self.log = log
        self._out: IO[bytes] = log.open("ab")
        env = {**environ, "TICKLOCK_PORT": str(free_port())}
        argv = [python, "-m", "ticklock", "serve"]
        self.proc = subprocess.Popen(argv, env=env, stdout=self._out, stderr=subprocess.STDOUT, cwd=cwd)
        self.started_ns = time.time_ns()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"ticklock serve (pid {self.pid}) exited with {self.proc.returncode}:\n{tail}")

    def kill(self) -> int:
        """SIGKILL; returns the moment just before it (ns)."""
        self.check_alive()  # it must be killed, not have died: a crash of its own is a failure
        at = time.time_ns()
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()
        return at

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL past ``timeout``); its exit code, or None if it had to be killed.
        Safe to call on a process already gone."""
        code: int | None = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        else:
            code = self.proc.returncode
        self._out.close()
        return code


# -- the stream -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    kills: int = 20  # at least
    fires: int = 5_000  # at least, counted from the start marks
    bound: float = 15.0  # s after a restart that every job gets to run again before the next kill
    pause: tuple[float, float] = (0.3, 3.0)  # s, uniform: from every job back at work to the next kill
    cap: float = 200.0  # s the stream lasts at most, whatever it reached
    first_run: float = 60.0  # s the first process gets to run every job once
    drain: float = 0.0  # s after the last kill for every job to run again, so that long gaps are measured


@dataclass(frozen=True)
class Kill:
    at_ns: int  # just before the SIGKILL
    pid: int  # the process killed
    restarted_ns: int | None  # when the next process was started (None: not restarted at once)
    running: frozenset[Fire] | None  # fires whose execution the store held as running at the kill (None: not read)


def wait_back(
    folder: Path, jobs: Sequence[str], *, since_ns: int, dead: int, until: float, alive: Callable[[], None]
) -> set[str]:
    """Poll the marks until every job has started a run after ``since_ns`` on a process other than
    ``dead``, or until ``until`` (monotonic); returns the jobs that have not."""
    waiting = set(jobs)
    while True:
        alive()
        back = {r.job for r in read_runs(folder) if r.start_ns > since_ns and r.pid != dead}
        waiting -= back
        if not waiting or time.monotonic() >= until:
            return waiting
        time.sleep(0.2)


def fires_marked(folder: Path) -> int:
    return len({r.fire for r in read_runs(folder)})


def restart_stream(
    start: Callable[[], Serve],
    folder: Path,
    jobs: Sequence[str],
    rng: random.Random,
    plan: Plan,
    *,
    running_at_kill: Callable[[], frozenset[Fire]] | None = None,
    started: list[Serve],
) -> list[Kill]:
    """One process at a time: wait for every job to run, then kill at a random moment, read the store
    (``running_at_kill``), start the next at once, and wait for every job to run again (``plan.bound``);
    until ``plan.kills`` kills and ``plan.fires`` fires, or ``plan.cap``. Each process started is appended
    to ``started`` (the caller stops them, whatever happens); the last is left running."""
    serve = start()
    started.append(serve)
    began = time.monotonic()
    late = wait_back(folder, jobs, since_ns=0, dead=0, until=began + plan.first_run, alive=serve.check_alive)
    assert not late, f"{len(late)} jobs never ran in the first {plan.first_run:.0f} s: {sorted(late)[:5]}"
    kills: list[Kill] = []
    while time.monotonic() - began < plan.cap:
        if len(kills) >= plan.kills and fires_marked(folder) >= plan.fires:
            break
        time.sleep(rng.uniform(*plan.pause))
        at = serve.kill()
        running = running_at_kill() if running_at_kill is not None else None
        dead = serve.pid
        serve = start()
        started.append(serve)
        kills.append(Kill(at, dead, serve.started_ns, running))
        until = time.monotonic() + plan.bound
        wait_back(folder, jobs, since_ns=at, dead=dead, until=until, alive=serve.check_alive)
    if kills and plan.drain:
        until = time.monotonic() + plan.drain
        wait_back(folder, jobs, since_ns=kills[-1].at_ns, dead=kills[-1].pid, until=until, alive=serve.check_alive)
    return kills


def running_in_sqlite(db: Path, names: Mapping[str, str]) -> Callable[[], frozenset[Fire]]:
    """What the SQLite file holds as running (its writer dead: exactly what it had committed)."""

    def read() -> frozenset[Fire]:
        conn = sqlite3.connect(db, timeout=30)
        try:
            rows = conn.execute("SELECT job_id, scheduled_at FROM executions WHERE status = 'running'").fetchall()
        finally:
            conn.close()
        return frozenset((names[job_id], at // 1000) for job_id, at in rows if job_id in names)

    return read


# -- what the marks say ---------------------------------------------------------------------------------
@dataclass
class Findings:
    runs: int
    fires: int  # distinct (job, slot) that started
    twice: list[Fire]  # fires that started more than once, in order
    cut_mid_run: list[Fire]  # of those, whose earlier run had no end mark
    ended_unwritten: list[Fire]  # of those, whose earlier run had ended (end mark) but was not finalised
    unexplained: list[str]  # re-runs that no kill explains: the invariant broken
    unexplained_fires: list[Fire] = field(default_factory=list)
    gaps: list[dict[str, float | None]] = field(default_factory=list)  # per kill: job -> s kill to next run
    from_restart: list[dict[str, float | None]] = field(default_factory=list)  # per kill: s restart to next run


def analyse(runs: Sequence[Run], kills: Sequence[Kill], jobs: Sequence[str]) -> Findings:
    by_fire: dict[Fire, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.start_ns):
        by_fire[run.fire].append(run)
    found = Findings(runs=len(runs), fires=len(by_fire), twice=[], cut_mid_run=[], ended_unwritten=[], unexplained=[])
    for fire, seen in sorted(by_fire.items()):
        if len(seen) < 2:
            continue
        found.twice.append(fire)
        (found.ended_unwritten if seen[0].ended else found.cut_mid_run).append(fire)
        for earlier, later in itertools.pairwise(seen):
            why = _unexplained(fire, earlier, later, kills)
            if why:
                found.unexplained.append(why)
                found.unexplained_fires.append(fire)
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.start_ns):
        by_job[run.job].append(run)
    for kill in kills:
        nexts = {
            job: next((r for r in by_job[job] if r.start_ns > kill.at_ns and r.pid != kill.pid), None) for job in jobs
        }
        found.gaps.append({job: None if r is None else (r.start_ns - kill.at_ns) / NS for job, r in nexts.items()})
        restarted = kill.restarted_ns
        found.from_restart.append(
            {job: None if r is None or restarted is None else (r.start_ns - restarted) / NS for job, r in nexts.items()}
        )
    return found


def _unexplained(fire: Fire, earlier: Run, later: Run, kills: Sequence[Kill]) -> str | None:
    """Why ``later`` should not have run, or None: a kill of ``earlier``'s process came between the two, and
    (where the store was read at the kill) the fire's execution was still running then."""
    what = f"{fire}: run {earlier.stem} (end mark: {earlier.ended}) ran again as {later.stem}"
    kill = next((k for k in kills if k.pid == earlier.pid and earlier.start_ns < k.at_ns < later.start_ns), None)
    if kill is None:
        return f"{what}, and no kill of its process came between"
    if kill.running is not None and fire not in kill.running:
        return f"{what} after the kill of pid {kill.pid}, though its execution was final at the kill"
    return None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(len(ordered) * q / 100))) - 1]


def spread(values: Sequence[float | None]) -> str:
    """p50 / p95 / max of the values, and how many are missing (no next run seen)."""
    seen = [v for v in values if v is not None]
    parts = [f"{percentile(seen, q):.2f}" if seen else "-" for q in (50, 95, 100)]
    missing = len(values) - len(seen)
    return " / ".join(parts) + (f" ({missing} none)" if missing else "")


def kill_lines(found: Findings, kills: Sequence[Kill]) -> list[str]:
    """One line per kill: the gap from the kill to each job's next run, p50 / p95 / max."""
    lines = []
    for n, (kill, gap, since) in enumerate(zip(kills, found.gaps, found.from_restart, strict=True), 1):
        cut = len(kill.running) if kill.running is not None else "?"
        lines.append(
            f"kill {n:2d} (pid {kill.pid}, {cut} runs open in the store): s from the kill to each job's next run "
            f"p50/p95/max {spread(list(gap.values()))}; from the restart {spread(list(since.values()))}"
        )
    return lines


def log_about(log: Path, fires: Sequence[Fire], *, limit: int = 40) -> list[str]:
    """The log's lines about ``fires`` (each line of TICKLOCK_FIRE_LOG=each names its job and fire time)."""
    wanted = [(f'"job_name": "{job}"', at_ms(slot).isoformat()) for job, slot in fires]
    with log.open(errors="replace") as lines:
        found = [line.rstrip() for line in lines if any(job in line and at in line for job, at in wanted)]
    return found[:limit]


def at_ms(moment_ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=moment_ms)


__all__ = ["Kill", "Plan", "Run", "Serve", "analyse", "every_second_jobs", "read_runs", "restart_stream", "slot_ms"]
