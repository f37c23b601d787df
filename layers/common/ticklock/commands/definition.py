"""The options that define a job, for ``jobs create`` and ``jobs edit``, and the body each sends.

An edit changes only what its options name: the job is read first and each option merged into its own
field (``--tz`` alone changes the zone and keeps the expression; ``--cron`` keeps the zone and the cron's
clock-change choices), and the PATCH carries only the fields that then differ. An option that does not
apply to the schedule's kind is refused with the reason (``ValueError``: exit 2), never dropped.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

OPTION = {"cron": "--cron", "interval": "--every", "once": "--at"}
CRON_FIELDS = ("kind", "expr", "timezone", "gap", "overlap")  # what a PATCH's cron schedule may carry


def add_options(parser: argparse.ArgumentParser) -> None:
    """The definition's options, shared by ``jobs create`` and ``jobs edit``."""
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--cron", metavar="EXPR", help="six fields, seconds first, or @hourly and the like")
    shape.add_argument("--every", type=int, metavar="SECONDS", help="an interval, from the end of each run")
    shape.add_argument("--at", metavar="T", help="once, at this instant (RFC 3339)")
    parser.add_argument(
        "--tz", metavar="ZONE", help="a cron schedule's timezone (UTC); on edit, alone, it changes only the zone"
    )
    parser.add_argument("--payload", metavar="JSON", help="the payload, a JSON object")
    parser.add_argument("--timeout", type=float, help="seconds, retries included (60)")
    parser.add_argument("--max-retries", type=int, dest="max_retries")
    parser.add_argument("--policy", metavar="JSON", help="the whole policy, a JSON object")
    parser.add_argument("--alerts", metavar="JSON", help="the whole set of alert rules, a JSON object")
    state = parser.add_mutually_exclusive_group()
    state.add_argument("--enabled", dest="enabled", action="store_const", const=True)
    state.add_argument("--disabled", dest="enabled", action="store_const", const=False)


def create_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /jobs`` body the options give."""
    schedule = _schedule(args, None)
    if schedule is None:
        raise ValueError("a job needs a schedule: --cron, --every or --at")
    return {"name": args.name, "schedule": schedule, **_fields(args)}


def edit_body(args: argparse.Namespace, job: dict[str, Any]) -> dict[str, Any]:
    """The ``PATCH`` for ``job`` (as the API gives it): the fields the options change, those alone that
    differ from the job's (``{}``: it is already so)."""
    wanted = _fields(args)
    if args.name is not None:
        wanted["name"] = args.name
    schedule = _schedule(args, job["schedule"])
    if schedule is not None:
        wanted["schedule"] = schedule
    if not wanted:
        raise ValueError("nothing to change: give the fields to change")
    return {key: value for key, value in wanted.items() if _same(value) != _same(job.get(key))}


def _schedule(args: argparse.Namespace, current: dict[str, Any] | None) -> dict[str, Any] | None:
    """The schedule the options ask for, merged into ``current`` (None on create); None: unchanged."""
    kind = "cron" if args.cron is not None else "interval" if args.every is not None else None
    kind = "once" if args.at is not None else kind
    if kind is None:
        if args.tz is None or current is None:
            return None
        if current["kind"] != "cron":
            raise ValueError(
                f"--tz: the job's schedule is {current['kind']} ({OPTION[current['kind']]}), which has no "
                "timezone; give --cron with --tz to make it a cron schedule"
            )
        return {**_cron(current), "timezone": args.tz}
    if args.tz is not None and kind != "cron":
        raise ValueError(f"--tz is a cron schedule's timezone; {OPTION[kind]} has none")
    if kind == "interval":
        return {"kind": "interval", "seconds": args.every}
    if kind == "once":
        return {"kind": "once", "at": args.at}
    # a new expression keeps the zone and the clock-change choices of the cron it replaces
    schedule = {**(_cron(current) if current and current["kind"] == "cron" else {}), "kind": "cron", "expr": args.cron}
    if args.tz is not None:
        schedule["timezone"] = args.tz
    return schedule


def _cron(schedule: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schedule.items() if key in CRON_FIELDS}


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key in ("payload", "policy", "alerts"):
        text = getattr(args, key)
        if text is not None:
            try:
                body[key] = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"--{key} is not JSON: {exc}") from None
    for key in ("timeout", "max_retries", "enabled", "handler"):
        if getattr(args, key, None) is not None:
            body[key] = getattr(args, key)
    return body


def _same(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
