"""``ticklock apply -f jobs.yaml [--plan] [--prune]`` and ``ticklock export``: jobs as code.

A file (YAML, or JSON) holds ``jobs:``, a list of job definitions as the API takes them (``name``,
``handler``, ``schedule``, ``payload``, ``timeout``, ``max_retries``, ``enabled``, ``policy``,
``alerts``). Each job is the whole truth of its definition: a field left out is its default, as at
``POST /jobs``. Jobs are matched by name. ``apply`` creates the missing, changes what differs (one
PATCH of the fields that differ) and, with ``--prune``, deletes the live jobs the file does not name
(never the plug-ins' ``system:`` jobs). ``--plan`` prints what ``apply`` would do and changes nothing:
exit 0 when there is nothing to do, 4 when there is. Comparing goes through the engine's own
schedule, policy and alert types, so that ``expr: "@hourly"`` and its defaults compare as the API
stores them. ``export`` writes the live jobs in the same format.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from ticklock.commands.client import ApiClient
from ticklock.commands.jobs import pages
from ticklock.domain.job_settings import AlertRules, Policy
from ticklock.domain.schedules import schedule_from_dict, schedule_to_dict

EXIT_PENDING = 4  # --plan: there are changes to make
FIELDS = ("handler", "schedule", "payload", "timeout", "max_retries", "enabled", "policy", "alerts")
DEFAULTS: dict[str, Any] = {
    "payload": {},
    "timeout": 60.0,
    "max_retries": 0,
    "enabled": True,
    "policy": {},
    "alerts": None,
}
SYSTEM = "system:"


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    apply = commands.add_parser("apply", parents=[common], help="make the live jobs what a file says (jobs as code)")
    apply.add_argument("-f", "--file", required=True, type=Path, help="the jobs file (YAML or JSON)")
    apply.add_argument("--plan", action="store_true", help="print what would change, change nothing (exit 4 if any)")
    apply.add_argument("--prune", action="store_true", help="delete the live jobs the file does not name")
    export = commands.add_parser("export", parents=[common], help="write the live jobs as a jobs file")
    export.add_argument("-o", "--output", type=Path, default=None, help="the file to write (standard output)")


def normal(job: dict[str, Any]) -> dict[str, Any]:
    """A job's definition as the API keeps it: every field, defaults filled in, through the engine's types.
    Raises ``ValueError`` naming the job and the field for one that cannot be."""
    name = job.get("name")
    unknown = set(job) - {"name", *FIELDS}
    if not isinstance(name, str) or not name:
        raise ValueError(f"a job without a name: {json.dumps(job)[:200]}")
    if unknown:
        raise ValueError(f"job {name!r}: unknown field {sorted(unknown)[0]!r}")
    full = {**DEFAULTS, **{k: v for k, v in job.items() if k != "name"}}
    try:
        full["schedule"] = schedule_to_dict(schedule_from_dict(dict(full["schedule"])))
        full["policy"] = Policy.from_dict(full["policy"]).to_dict()
        rules = AlertRules.from_dict(full["alerts"])
        full["alerts"] = None if rules is None else rules.to_dict()
        full["timeout"] = float(full["timeout"])
    except Exception as exc:  # noqa: BLE001 - the types say what is wrong; the file's job is named
        raise ValueError(f"job {name!r}: {getattr(exc, 'field', None) or ''} {exc}".replace("  ", " ")) from None
    if "handler" not in job or "schedule" not in job:
        raise ValueError(f"job {name!r}: handler and schedule are required")
    return {"name": name, **{k: full[k] for k in FIELDS}}


def live_definition(job: dict[str, Any]) -> dict[str, Any]:
    """A job as ``GET /jobs`` gives it, in the file's shape."""
    return {"name": job["name"], **{k: job[k] for k in FIELDS}}


def plan(wanted: list[dict[str, Any]], live: list[dict[str, Any]], *, prune: bool) -> list[tuple[str, str, Any]]:
    """The changes, in order: ("create", name, definition), ("change", name, {field: (old, new)}),
    ("delete", name, job id)."""
    by_name = {j["name"]: j for j in live}
    changes: list[tuple[str, str, Any]] = []
    for job in wanted:
        current = by_name.get(job["name"])
        if current is None:
            changes.append(("create", job["name"], job))
            continue
        have = live_definition(current)
        differ = {
            k: (have[k], job[k])
            for k in FIELDS
            if json.dumps(have[k], sort_keys=True) != json.dumps(job[k], sort_keys=True)
        }
        if differ:
            changes.append(("change", job["name"], {"id": current["id"], "fields": differ}))
    if prune:
        named = {j["name"] for j in wanted}
        for job in live:
            if job["name"] not in named and not job["name"].startswith(SYSTEM):
                changes.append(("delete", job["name"], job["id"]))
    return changes


def describe(changes: list[tuple[str, str, Any]], *, done: bool = False) -> str:
    """The changes, one line each (a change's fields below it), and their counts: what is to be done, or
    with ``done`` what was."""
    if not changes:
        return f"{'nothing to do' if done else 'no changes'}: the live jobs are what the file says"
    lines = []
    for kind, name, what in changes:
        if kind == "create":
            lines.append(f"+ {name}: create ({what['handler']}, {json.dumps(what['schedule'])})")
        elif kind == "delete":
            lines.append(f"- {name}: delete")
        else:
            lines.append(f"~ {name}:")
            for field, (old, new) in what["fields"].items():
                lines.append(f"    {field}: {json.dumps(old)} -> {json.dumps(new)}")
    counts = {k: sum(c[0] == k for c in changes) for k in ("create", "change", "delete")}
    if done:
        lines.append(f"created {counts['create']}, changed {counts['change']}, deleted {counts['delete']}")
    else:
        lines.append(f"{counts['create']} to create, {counts['change']} to change, {counts['delete']} to delete")
    return "\n".join(lines)


def load(path: Path) -> Any:
    """The file's content (JSON for a ``.json`` file, else YAML); ``ValueError``, in one line naming the
    file (and the line and column where the parser gives them), for any file that cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: a directory, not a jobs file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        context = f" ({exc.context})" if exc.context else ""
        raise ValueError(f"{path}{where}: not valid YAML: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:  # the reader's errors (a control character) carry no line
        raise ValueError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None


def read(path: Path) -> list[dict[str, Any]]:
    """The jobs a file defines, each through ``normal``."""
    data = load(path)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise ValueError(f"{path}: expected `jobs:`, a list of job definitions")
    wanted = [normal(j) for j in jobs]
    names = [j["name"] for j in wanted]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{path}: the job {twice[0]!r} is defined twice")
    return wanted


def apply(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str, int]:
    wanted = read(args.file)
    changes = plan(wanted, list(pages(client, "/jobs", {"limit": 500})), prune=args.prune)
    summary = [{"action": k, "name": n} for k, n, _ in changes]
    if args.plan:
        return summary, describe(changes), EXIT_PENDING if changes else 0
    for kind, _name, what in changes:
        if kind == "create":
            client.call("POST", "/jobs", body=what)
        elif kind == "change":
            client.call("PATCH", f"/jobs/{what['id']}", body={k: new for k, (_, new) in what["fields"].items()})
        else:
            client.call("DELETE", f"/jobs/{what}")
    return summary, describe(changes, done=True), 0


def export(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str, int]:
    jobs = [live_definition(j) for j in pages(client, "/jobs", {"limit": 500})]
    text = yaml.safe_dump({"jobs": jobs}, sort_keys=False, allow_unicode=True)
    if args.output is not None:
        args.output.write_text(text)
        return {"jobs": len(jobs)}, f"{len(jobs)} jobs written to {args.output}", 0
    return {"jobs": jobs}, text.rstrip("\n"), 0
