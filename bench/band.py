"""The performance band: ticklock as another tree builds it (``--before``, a source tree with its own
``.venv``) beside this one, on the rows of ``bench/fires.py`` the band covers, in one run.

Usage::

    .venv/bin/python bench/band.py --before ~/.cache/ticklock/ticklock-b0a426d [--rounds 2] [--only a,b,c,e,f,g]

Each row runs the before tree's own ``bench/fires.py`` (its ticklock, its store filling) and this tree's in
turn, ``--rounds`` times, alternating which goes first; the table shows each side's best CPU per fire (the
least disturbed by the machine's other work), its lag p99 and max, lost fires and duplicates, the ratio
of CPU per fire, and the band: at most ``MAX_RATIO`` the before tree's CPU per fire, 0 lost, 0 duplicates,
the burst of 1,000 (e) with lag p99 at most 100 ms and the burst of 10,000 (f) starting its last fire
within 1.5 s; the replica shape on FerretDB 2.5 (n) keeps at least 90 % of its fires/s.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_RATIO = 1.35
BURST_P99 = {"e": 0.100}  # seconds: the burst of 1,000's lag p99
LAST_START = {"f": 1.5}  # seconds: the burst of 10,000's last start (its lag max)
KEEP_RATE = {"n": 0.90}  # the replica shape on FerretDB 2.5: at least this share of the before tree's fires/s


@dataclass
class Cells:
    rate: float | None
    cpu_us: float | None
    p99: float | None
    worst: float | None
    lost: int | None
    duplicates: int | None


def seconds(text: str) -> float | None:
    found = re.search(r"([\d.,]+)\s*(µs|us|ms|s)\b", text)
    if found is None:
        return None
    value = float(found.group(1).replace(",", ""))
    return value * {"µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}[found.group(2)]


def count(text: str) -> int | None:
    found = re.search(r"\d[\d,]*", text)
    return None if found is None else int(found.group(0).replace(",", ""))


def parse(table: str, key: str) -> Cells:
    """The row of scenario ``key`` in ``bench/fires.py``'s Markdown table."""
    header: list[str] | None = None
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None and "CPU per fire" in cells:
            header = cells
            continue
        if header is not None and len(cells) == len(header) and cells[1].startswith(f"({key})"):
            row = dict(zip(header, cells, strict=True))
            cpu = seconds(row["CPU per fire"])
            rate = re.match(r"[\d,.]+", row["fires/s (measured / nominal)"])
            return Cells(None if rate is None else float(rate.group(0).replace(",", "")),
                         None if cpu is None else cpu * 1e6, seconds(row["lag p99"]), seconds(row["lag max"]),
                         count(row["fires lost"]), count(row["duplicates"]))  # fmt: skip
    raise SystemExit(f"band: no row ({key}) in bench/fires.py's output:\n{table}")


def run(python: str, tree: Path, key: str, quick: bool) -> Cells:
    argv = [python, str(tree / "bench" / "fires.py"), "--only", key, *(["--quick"] if quick else [])]
    print(f"band: {tree.name} ({key}) ...", file=sys.stderr)
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"band: {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return parse(done.stdout, key)


def best(runs: list[Cells]) -> Cells:
    """The round with the least CPU per fire, its lost fires and duplicates the most of any round."""
    chosen = min(runs, key=lambda c: c.cpu_us if c.cpu_us is not None else float("inf"))
    lost, duplicates = max((c.lost or 0) for c in runs), max((c.duplicates or 0) for c in runs)
    return Cells(max((c.rate or 0.0) for c in runs), chosen.cpu_us, chosen.p99, chosen.worst, lost, duplicates)


def fmt(value: float | None, scale: float, unit: str) -> str:
    return "-" if value is None else f"{value * scale:,.0f} {unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", type=Path, required=True, help="a source tree with its own .venv")
    parser.add_argument("--label", default=None, help="what the table calls the before tree")
    parser.add_argument("--only", default="a,b,c,e,f,g")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="bench/fires.py's shorter windows")
    args = parser.parse_args(argv)
    before, after = args.before.resolve(), HERE.parent
    old_python = str(before / ".venv" / "bin" / "python")
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    lines = [
        f"| scenario | CPU per fire, {args.label or before.name} | CPU per fire, this tree | ratio "
        f"(≤ {MAX_RATIO}) | lag p99 / max, before | lag p99 / max, this tree | lost / duplicates | band |",
        "|---|---|---|---|---|---|---|---|",
    ]
    held = True
    for key in keys:
        olds: list[Cells] = []
        news: list[Cells] = []
        for k in range(args.rounds):
            order = [("old", old_python, before), ("new", sys.executable, after)]
            for side, python, tree in order if k % 2 == 0 else reversed(order):
                (olds if side == "old" else news).append(run(python, tree, key, args.quick))
        old, new = best(olds), best(news)
        ratio = None if not (old.cpu_us and new.cpu_us) else new.cpu_us / old.cpu_us
        if key in KEEP_RATE:  # judged by its fires/s, a server's bound, not by the CPU per fire
            ok = bool(old.rate and new.rate and new.rate >= KEEP_RATE[key] * old.rate) and not new.duplicates
        else:
            ok = ratio is not None and ratio <= MAX_RATIO and not new.lost and not new.duplicates
        if key in BURST_P99:
            ok = ok and new.p99 is not None and new.p99 <= BURST_P99[key]
        if key in LAST_START:
            ok = ok and new.worst is not None and new.worst <= LAST_START[key]
        held = held and ok
        rates = f" (fires/s {old.rate:,.0f} → {new.rate:,.0f})" if key in KEEP_RATE else ""
        lines.append(
            f"| ({key}) | {fmt(old.cpu_us, 1, 'µs')} | {fmt(new.cpu_us, 1, 'µs')} | "
            f"{'-' if ratio is None else f'{ratio:.2f} x'} | "
            f"{fmt(old.p99, 1000, 'ms')} / {fmt(old.worst, 1000, 'ms')} | "
            f"{fmt(new.p99, 1000, 'ms')} / {fmt(new.worst, 1000, 'ms')} | {new.lost} / {new.duplicates} | "
            f"{'held' if ok else 'NOT held'}{rates} |"
        )
    print(f"### The performance band ({args.rounds} round(s) a row, the best CPU per fire of each side)\n")
    print("\n".join(lines))
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
