"""Cold start of the three Lambda functions (tick, runner, api): import time, container build, first calls.

Usage::

    .venv/bin/python bench/cold_start.py [--quick] [--repeat N] [--only tick,runner,api]

Each measurement is a fresh interpreter (``python -c``, the child below) started the way Lambda loads a
function: the function's folder first on ``sys.path`` (and the working directory), ``ticklock`` from
``layers/common`` (``PYTHONPATH``), then ``import app``. Inside the child, with ``time.perf_counter``:

* **import** = ``import app`` (the function module, and with it ``ticklock.runtimes.aws``);
* **container build** = the first ``app.container()``: settings, logging, store, lock, metrics, publisher,
  handler registry, runner (the "init" of a cold start beyond the imports);
* **first call / warm call** (api only) = ``app.handler`` on ``events/api-list-jobs.json``, twice: the
  first builds the API resolver, the second reuses it. The tick's invocation lasts a minute and the
  runner's needs fires that are due, so they have no calls here;
* **RSS after** = the child's resident memory once all of that is done.

The environment is a deployment's without the network: ``TICKLOCK_STORE`` a SQLite file in a temporary
folder, ``TICKLOCK_LOCK=local``, ``TICKLOCK_QUEUE_URL`` a closed loopback port, ``TICKLOCK_EVENTS`` an
EventBridge bus as in ``template.yaml`` (so the boto3 events client is built), fake AWS credentials and
region, no AWS config files. One untimed child first runs with an audit hook that counts network
operations (connect, name resolution, send): if building with the EventBridge publisher made any, the
timed runs leave ``TICKLOCK_EVENTS`` unset (the table's notes say which). That child also creates the
SQLite schema and the ``.pyc`` files, so the timed runs see a store that exists and compiled bytecode,
as a deployed function does. Repetitions go round the functions in turn, so that drift spreads evenly.

The notes add the interpreter's own start-up (``python -c pass``, timed from this process) and, from one
``python -X importtime -c "import app"`` of the api function (all three import the same modules through
``ticklock.runtimes.aws``), the heaviest modules and top-level packages by their own import time.
``--quick`` does 3 repetitions instead of 10.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from _stats import percentile

ROOT = Path(__file__).resolve().parent.parent
LAYER = ROOT / "layers" / "common"
FUNCTIONS = ("tick", "runner", "api")
EVENTS = {"api": ROOT / "events" / "api-list-jobs.json"}  # the functions whose calls are timed
EVENT_BUS = "eventbridge:ticklock-bench"
MARK = "COLD-START-RESULT "
CHILD_TIMEOUT = 120.0  # s, one child
NETWORK_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.sendto",
        "socket.sendmsg",
    }
)

# The child: argv = [function folder, event file or "", "audit" or ""]. It imports nothing before its first
# clock reading but ``sys`` and ``time`` (both already loaded by the interpreter's start-up).
CHILD = r"""
import sys, time
t0 = time.perf_counter()
folder, event_path, audit = sys.argv[1], sys.argv[2], sys.argv[3] == "audit"
network = []
if audit:
    phase = ["import"]
    watched = frozenset(sys.argv[4].split(","))
    sys.addaudithook(lambda name, args: network.append(phase[0] + ":" + name) if name in watched else None)
    t0 = time.perf_counter()
sys.path.insert(0, folder)
import app
t1 = time.perf_counter()
if audit:
    phase[0] = "build"
app.container()
t2 = time.perf_counter()
first = warm = None
status = []
if event_path:
    import json
    with open(event_path, encoding="utf-8") as f:
        text = f.read()
    if audit:
        phase[0] = "call"
    event = json.loads(text)
    t3 = time.perf_counter()
    status.append(app.handler(event, None).get("statusCode"))
    first = time.perf_counter() - t3
    event = json.loads(text)
    t3 = time.perf_counter()
    status.append(app.handler(event, None).get("statusCode"))
    warm = time.perf_counter() - t3
rss = None
try:
    with open("/proc/self/status", encoding="ascii") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
except (OSError, StopIteration, ValueError):
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss = peak if sys.platform == "darwin" else peak * 1024
import json
out = {"import": t1 - t0, "build": t2 - t1, "first": first, "warm": warm, "rss": rss, "status": status,
       "network": network}
print("COLD-START-RESULT " + json.dumps(out), flush=True)
"""


@dataclass(frozen=True)
class Sample:
    """One fresh interpreter's figures (seconds, bytes)."""

    import_s: float
    build_s: float
    first_s: float | None
    warm_s: float | None
    rss: int | None
    status: list[int]
    network: list[str]


@dataclass
class Result:
    function: str
    samples: list[Sample] = field(default_factory=list)


# -- running children -------------------------------------------------------------------------------
def child_env(workdir: Path, *, events: bool) -> dict[str, str]:
    """This process's environment without TICKLOCK_*, AWS_*, POWERTOOLS_* and PYTHON* variables, plus a
    deployment's settings pointing nowhere on the network."""
    drop = ("TICKLOCK_", "AWS_", "POWERTOOLS_", "PYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        {
            "PYTHONPATH": str(LAYER),
            "TICKLOCK_STORE": f"sqlite:///{workdir / 'ticklock.db'}",
            "TICKLOCK_LOCK": "local",
            "TICKLOCK_QUEUE_URL": "http://127.0.0.1:1/000000000000/q",
            "TICKLOCK_LOG_FORMAT": "json",
            "POWERTOOLS_SERVICE_NAME": "ticklock",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": str(workdir / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "no-aws-credentials"),
        }
    )
    if events:
        env["TICKLOCK_EVENTS"] = EVENT_BUS
    return env


def run_child(function: str, env: Mapping[str, str], *, audit: bool = False) -> Sample:
    folder = ROOT / "functions" / function
    event = EVENTS.get(function)
    argv = [
        sys.executable,
        "-c",
        CHILD,
        str(folder),
        str(event or ""),
        "audit" if audit else "",
        ",".join(NETWORK_EVENTS),
    ]
    proc = subprocess.run(argv, cwd=folder, env=dict(env), capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise SystemExit(f"bench: the {function} child failed (exit {proc.returncode}):\n{tail}")
    data = json.loads(lines[-1].removeprefix(MARK))
    sample = Sample(
        import_s=float(data["import"]),
        build_s=float(data["build"]),
        first_s=None if data["first"] is None else float(data["first"]),
        warm_s=None if data["warm"] is None else float(data["warm"]),
        rss=None if data["rss"] is None else int(data["rss"]),
        status=[int(s) for s in data["status"]],
        network=[str(n) for n in data["network"]],
    )
    if any(s != 200 for s in sample.status):
        raise SystemExit(f"bench: the {function} handler answered {sample.status}, expected 200")
    return sample


def interpreter_startup(repeat: int) -> list[float]:
    """Wall seconds of ``python -c pass`` (this venv's interpreter), timed from here."""
    times: list[float] = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=CHILD_TIMEOUT)
        times.append(time.perf_counter() - began)
    return times


@dataclass(frozen=True)
class ImportCost:
    name: str
    self_us: int
    cumulative_us: int


def import_costs(function: str, env: Mapping[str, str]) -> list[ImportCost]:
    """``python -X importtime -c "import app"`` in the function's folder, parsed."""
    folder = ROOT / "functions" / function
    argv = [sys.executable, "-X", "importtime", "-c", "import app"]
    proc = subprocess.run(argv, cwd=folder, env=dict(env), capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    if proc.returncode != 0:
        raise SystemExit(f"bench: -X importtime of {function} failed:\n{proc.stderr[-2000:]}")
    costs: list[ImportCost] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue  # the header line
        costs.append(ImportCost(parts[2].strip(), int(parts[0]), int(parts[1])))
    return costs


# -- the table --------------------------------------------------------------------------------------
def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _p50(values: Sequence[float | None]) -> float | None:
    return percentile([v for v in values if v is not None], 50)


HEADER = [
    "function",
    "import p50 / max (ms)",
    "container build p50 (ms)",
    "first call (ms)",
    "warm call (ms)",
    "RSS after (MB)",
]


def markdown_table(results: Sequence[Result]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for result in results:
        s = result.samples
        imports = [x.import_s for x in s]
        rss = _p50([None if x.rss is None else x.rss / (1024 * 1024) for x in s])
        cells = [
            result.function,
            f"{_ms(percentile(imports, 50))} / {_ms(max(imports) if imports else None)}",
            _ms(_p50([x.build_s for x in s])),
            _ms(_p50([x.first_s for x in s])),
            _ms(_p50([x.warm_s for x in s])),
            "-" if rss is None else f"{rss:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def heaviest(costs: Sequence[ImportCost], top: int = 5) -> tuple[str, str]:
    """The ``top`` modules by their own import time, and the ``top`` top-level packages by the sum of theirs."""
    modules = sorted(costs, key=lambda c: c.self_us, reverse=True)[:top]
    packages: collections.Counter[str] = collections.Counter()
    for c in costs:
        packages[c.name.split(".")[0]] += c.self_us
    by_module = ", ".join(f"`{c.name}` {c.self_us / 1000:.0f} ms" for c in modules)
    by_package = ", ".join(f"`{name}` {us / 1000:.0f} ms" for name, us in packages.most_common(top))
    return by_module, by_package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 repetitions instead of 10 (~10 s)")
    parser.add_argument("--repeat", type=int, default=None, help="fresh interpreters per function (default 10)")
    parser.add_argument("--only", default=",".join(FUNCTIONS), help="comma-separated functions (default all three)")
    args = parser.parse_args(argv)
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 10)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in FUNCTIONS]
    if unknown:
        parser.error(f"unknown function(s) {unknown}; known: {', '.join(FUNCTIONS)}")
    began = time.monotonic()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ticklock-cold-") as tmp:
        workdir = Path(tmp)
        # untimed: the network check, the SQLite schema and the .pyc files
        events = True
        env = child_env(workdir, events=True)
        checked = {name: run_child(name, env, audit=True) for name in names}
        touched = sorted({n for s in checked.values() for n in s.network})
        if any(n.startswith(("import:", "build:")) for n in touched):
            events = False
            env = child_env(workdir, events=False)
            notes.append(f"with TICKLOCK_EVENTS={EVENT_BUS} the import or build used the network ({touched}): unset")
            checked = {name: run_child(name, env, audit=True) for name in names}
            touched = sorted({n for s in checked.values() for n in s.network})
            if any(n.startswith(("import:", "build:")) for n in touched):
                raise SystemExit(f"bench: the import or container build uses the network: {touched}")
        calls = sorted({n for n in touched if n.startswith("call:")})
        notes.append(
            "network operations (audit hook: connect, name resolution, send) during import and container build: "
            f"none; during the calls: {calls or 'none'}"
        )
        notes.append(
            f"TICKLOCK_EVENTS={EVENT_BUS if events else '(unset)'}, TICKLOCK_STORE=sqlite:///<tmp>/ticklock.db, "
            "TICKLOCK_LOCK=local, fake AWS credentials"
        )
        results = {name: Result(name) for name in names}
        for i in range(repeat):
            print(f"bench: repetition {i + 1}/{repeat} ...", file=sys.stderr)
            for name in names:
                results[name].samples.append(run_child(name, env))
        startup = interpreter_startup(repeat)
        costs = import_costs("api" if "api" in names else names[0], env)
    print(f"bench: done in {time.monotonic() - began:.0f} s", file=sys.stderr)
    mode = "quick" if args.quick else "full"
    print(
        f"### Cold start ({mode} run, {repeat} fresh interpreters per function, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n"
    )
    print(markdown_table(list(results.values())))
    print()
    print(
        f"- interpreter start-up (`python -c pass`, wall from the parent): p50 {_ms(percentile(startup, 50))} ms, "
        f"max {_ms(max(startup))} ms"
    )
    for note in notes:
        print(f"- {note}")
    by_module, by_package = heaviest(costs)
    print(f"- heaviest imports (`-X importtime`, one run, own time): {by_module}")
    print(f"- heaviest top-level packages (sum of their modules' own time): {by_package}")
    total = sum(c.self_us for c in costs) / 1000
    print(f"- `-X importtime` total for `import app`: {total:.0f} ms (the tracing itself adds some)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
