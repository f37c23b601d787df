"""Exits non-zero unless this interpreter, as the engine's suite runs it (from the repository's root, with
pytest's pythonpath), finds no plug-in but ticklock's own and cannot import the product plug-in: what
makes `make test`'s engine suite a run of ticklock without it."""

import importlib.util
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(root)]  # pytest's pythonpath = ["."]

from ticklock.handlers.plugin import discover  # noqa: E402 - after the path is what the suite's is

found = [p.name for p in discover()]
problems = []
if found != ["builtin"]:
    problems.append(f"plug-ins found: {found}, expected only ['builtin']")
for name in ("ticklock_parts", "ticklock_hello", "tests_parts"):
    if importlib.util.find_spec(name) is not None:
        problems.append(f"{name} is importable")
for problem in problems:
    print(f"engine-alone: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
