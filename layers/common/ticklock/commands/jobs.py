"""``ticklock jobs ls|show|pause|resume|trigger|skip|rm``, ``ticklock runs JOB`` and ``ticklock fires JOB``:
the REST API for people (tables) and scripts (``--json``).

A JOB is its id or its name. Exit codes: 0 done; 1 the API refused (its message is printed); 3 no API
answered at ``--api`` (nothing, or not a ticklock API); 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ticklock.commands import definition
from ticklock.commands.client import ApiClient, ApiError, NotTheApi, Unreachable, api_url

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
DEFAULT_API = "http://127.0.0.1:8080"
PAGE = 500
# a job's states, then the conditions that may hold on top of one (the API's `state` filter)
STATES = ("enabled", "paused", "held", "disabled", "done", "failing", "alerting")


COMMANDS = ("jobs", "runs", "fires", "apply", "export")


def add_commands(commands: Any) -> None:
    """Add ``jobs``, ``runs``, ``fires``, ``apply`` and ``export`` to the ``ticklock`` parser's subcommands."""
    from ticklock.commands import apply, ui

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--api",
        default=None,
        metavar="URL",
        help=f"the REST API (env TICKLOCK_API_URL, {DEFAULT_API}); HOST:PORT alone means http://HOST:PORT",
    )
    common.add_argument("--token", default=None, help="the bearer token (env TICKLOCK_API_TOKEN)")
    ui.add_signing_options(common)
    common.add_argument("--json", action="store_true", help="print the API's JSON, for scripts")
    apply.add_commands(commands, common)

    jobs = commands.add_parser("jobs", help="list, show, pause, resume, trigger, skip or delete jobs")
    actions = jobs.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", parents=[common], help="list the jobs")
    ls.add_argument("--handler", help="only the jobs of this handler")
    ls.add_argument("--search", metavar="TEXT", help="only the jobs whose name or handler contains TEXT (any case)")
    ls.add_argument("--state", choices=STATES, help="only the jobs in this state, or with this condition")
    state = ls.add_mutually_exclusive_group()
    state.add_argument("--enabled", dest="enabled", action="store_const", const=True, help="only enabled jobs")
    state.add_argument("--paused", dest="enabled", action="store_const", const=False, help="only paused jobs")
    for name, help_text in (
        ("show", "show one job"),
        ("resume", "schedule a paused or held job again, from now"),
        ("trigger", "run a job now, without moving its schedule"),
        ("rm", "delete a job and its history"),
    ):
        actions.add_parser(name, parents=[common], help=help_text).add_argument("job", metavar="JOB")
    pause = actions.add_parser("pause", parents=[common], help="stop scheduling a job, with a note, or until T")
    pause.add_argument("job", metavar="JOB")
    pause.add_argument("--note", help="why, for whoever looks next")
    pause.add_argument("--until", metavar="T", help="resume by itself at its first fire at or after T (RFC 3339)")
    skip = actions.add_parser("skip", parents=[common], help="skip a job's next fires")
    skip.add_argument("job", metavar="JOB")
    skip.add_argument("count", type=int, metavar="COUNT")
    skip.add_argument("--note", help="why")
    create = actions.add_parser("create", parents=[common], help="create a job")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--handler", required=True)
    definition.add_options(create)
    edit = actions.add_parser("edit", parents=[common], help="change the fields given of a job")
    edit.add_argument("job", metavar="JOB")
    edit.add_argument("--name", help="a new name")
    edit.add_argument("--handler")
    definition.add_options(edit)
    backfill = actions.add_parser("backfill", parents=[common], help="run the fires of a past window again, once each")
    backfill.add_argument("job", metavar="JOB")
    backfill.add_argument("--from", dest="start", required=True, metavar="T", help="the window's start (RFC 3339)")
    backfill.add_argument("--to", dest="end", required=True, metavar="T", help="its end, not after now")
    backfill.add_argument("--overlap", choices=("buffer_all", "allow_all"), default="buffer_all")
    backfill.add_argument("--dry-run", action="store_true", help="list the fires it would run, run none")

    runs = commands.add_parser("runs", parents=[common], help="a job's executions, newest first")
    runs.add_argument("job", metavar="JOB")
    runs.add_argument("--limit", type=int, default=20, help="how many (20)")
    fires = commands.add_parser("fires", parents=[common], help="what became of every fire of a job lately")
    fires.add_argument("job", metavar="JOB")
    fires.add_argument("--since", default="1h", metavar="SPAN", help="how far back: 30s, 15m, 1h, 2d (1h)")


def run(args: argparse.Namespace) -> int:
    """Carry out one of the COMMANDS; returns the exit code."""
    from ticklock.commands import apply, ui
    from ticklock.commands.sigv4 import SigningError, SigV4

    try:
        base = api_url(args.api or os.environ.get("TICKLOCK_API_URL") or DEFAULT_API)
        signer = ui.signer_for(args, base)
    except (ValueError, SigningError) as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    auth = SigV4(signer) if signer is not None else None
    token = None if signer is not None else args.token or os.environ.get("TICKLOCK_API_TOKEN")
    client = ApiClient(base, token, auth=auth)
    try:
        if args.command in ("apply", "export"):
            data, text, code = (apply.apply if args.command == "apply" else apply.export)(client, args)
        else:
            data, text = _COMMANDS[args.action if args.command == "jobs" else args.command](client, args)
            code = 0
    except ApiError as exc:
        named = [f"{d.get('field')}: {d.get('message')}" for d in exc.details if d.get("field")]
        fields = "".join(f"\n  {line}" for line in named if line != exc.message)  # the message may be the one
        print(f"ticklock: {exc.status}: {exc.message}{fields}{_hint(exc, token)}", file=sys.stderr)
        return EXIT_REFUSED
    except NotTheApi as exc:
        print(f"ticklock: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except Unreachable as exc:
        print(f"ticklock: no API answered: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (ValueError, OSError) as exc:  # a bad argument, a bad or missing file
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        client.close()
    print(json.dumps(data, indent=2) if args.json else text)
    return code


def _hint(exc: ApiError, token: str | None) -> str:
    """What to do about a 401: the API's own words name a header, not this command's options."""
    if exc.status != 401:
        return ""
    if token:
        return "\n  the token given (--token or TICKLOCK_API_TOKEN) was refused"
    return "\n  give the API's token with --token or TICKLOCK_API_TOKEN"


# -- the commands: each returns (the API's JSON, the text for people) ------------------------------------
def _ls(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    params: dict[str, Any] = {"limit": PAGE}
    if args.handler:
        params["handler"] = args.handler
    if args.search:
        params["q"] = args.search
    if args.state:
        params["state"] = args.state
    if args.enabled is not None and not args.state:  # the states of the same names, as the help says
        params["state"] = "enabled" if args.enabled else "paused"
    items = list(pages(client, "/jobs", params))
    rows = [("ID", "NAME", "HANDLER", "SCHEDULE", "NEXT FIRE", "STATE")]
    rows += [
        (j["id"][-8:], j["name"], j["handler"], schedule_words(j["schedule"]), _when(_next_fire(j)), state(j))
        for j in items
    ]
    return items, table(rows) if items else "no jobs"


def _next_fire(job: dict[str, Any]) -> str | None:
    """When a listed job fires next: a paused, disabled or done job keeps a time it will not fire at."""
    return job["next_run_at"] if job.get("state", "enabled") in ("enabled", "held") else None


def _show(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    # the fires to come as the engine will run them: the same list as the dashboard's job page
    coming = client.call("GET", f"/jobs/{job['id']}/upcoming", params={"count": 5})["fires"]
    first = next((f for f in coming if f["status"] in ("due", "running")), None)
    lines = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("handler", job["handler"]),
        ("schedule", f"{schedule_words(job['schedule'])}  {json.dumps(job['schedule'])}"),
        ("state", state(job)),
        ("next fire", _when(first["starts_at"] if first else None)),
        ("timeout", f"{job['timeout']:g} s, retries {job['max_retries']}"),
        ("policy", json.dumps(job["policy"])),
    ]
    if job.get("hold"):
        hold = job["hold"]
        if hold.get("resumes_at") is None:
            held = "paused until resumed"
        elif hold["kind"] == "skip":
            held = f"skipping its next {hold['count']} fires, until {_when(hold['resumes_at'])}"
        else:
            held = f"paused until {_when(hold['resumes_at'])}"
        lines.append(("hold", held + (f": {hold['note']}" if hold.get("note") else "")))
    for alert in job.get("open_alerts") or []:
        lines.append(("alert", f"{alert['condition']} since {_when(alert['raised_at'])}: {alert['detail']}"))
    for fire in coming:
        status = "runs" if fire["status"] == "due" else fire["status"]
        how = "" if fire["trigger"] == "schedule" else f" ({fire['trigger']})"
        lines.append(("to come", f"{_when(fire['at'])}  {status}{how}"))
    width = max(len(k) for k, _ in lines)
    return job, "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


def _action(path: str, body: Callable[[argparse.Namespace], Any] | None = None) -> Callable[..., tuple[Any, str]]:
    def act(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
        job = find(client, args.job)
        data = client.call("POST", f"/jobs/{job['id']}/{path}", body=body(args) if body else None)
        return data, f"{job['name']}: {state(data)}, next fire {_when(data.get('next_run_at'))}"

    return act


def _trigger(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    data = client.call("POST", f"/jobs/{job['id']}/trigger")
    # the run is due at once, even for a paused job; the schedule's own fires stay as they were
    name, scheduled = data["name"], _when(data.get("next_run_at"))
    return data, f"triggered {name}: a run is due now (`ticklock runs {name}` shows it); next fire {scheduled}"


def _pause_body(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in (("note", args.note), ("until", args.until)) if v is not None}


def _create(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = client.call("POST", "/jobs", body=definition.create_body(args))
    return job, f"{job['name']}: created ({job['id']}), next fire {_when(job['next_run_at'])}"


def _edit(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    body = definition.edit_body(args, job)
    if not body:
        return job, f"{job['name']}: unchanged, it is so already (version {job['version']})"
    changed = client.call("PATCH", f"/jobs/{job['id']}", body=body)
    said = f"{changed['name']}: changed ({', '.join(sorted(body))}), version {changed['version']}"
    if "schedule" in body:
        said += f"; schedule now {schedule_words(changed['schedule'])}"
    return changed, said


def _backfill(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    body = {"from": args.start, "to": args.end, "overlap": args.overlap, "dry_run": args.dry_run}
    answer = client.call("POST", f"/jobs/{job['id']}/backfill", body=body)
    rows = [("FIRE", "")] + [(_when(f["at"]), "already backfilled" if f["backfilled"] else "") for f in answer["fires"]]
    verb = "would run" if args.dry_run else "will run"
    return answer, f"{table(rows)}\n{job['name']}: {answer['count']} fires {verb}"


def _rm(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    client.call("DELETE", f"/jobs/{job['id']}")
    return {"deleted": job["id"]}, f"{job['name']}: deleted"


def _runs(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    items = client.call("GET", f"/jobs/{job['id']}/executions", params={"limit": args.limit})["items"]
    rows = [("FIRE", "TRIGGER", "STATUS", "LAG", "DURATION", "ATTEMPTS", "ERROR")]
    for e in items:
        duration = "-" if e["duration"] is None else f"{e['duration']:.3f} s"
        rows.append((_when(e["scheduled_at"]), e["trigger"], e["status"], f"{e['lag']:.3f} s", duration,
                     str(e["attempts"]), (e["error"] or "")[:80]))  # fmt: skip
    return items, table(rows) if items else f"{job['name']}: no runs"


def _fires(client: ApiClient, args: argparse.Namespace) -> tuple[Any, str]:
    job = find(client, args.job)
    now = datetime.now(UTC)
    params = {"from": (now - span(args.since)).isoformat(), "to": now.isoformat(), "limit": 1000}
    try:
        items = client.call("GET", f"/jobs/{job['id']}/fires", params=params)["items"]
    except ApiError as exc:
        # the API names its query's `from`; here that is --since
        said = [d.get("message", "") for d in exc.details if d.get("field") == "query.from"]
        if exc.status != 422 or not said:
            raise
        raise ValueError(f"--since {args.since}: {str(said[0]).removeprefix('query.from: ')}") from None
    rows = [("FIRE", "TRIGGER", "STATUS", "REASON")]
    rows += [(_when(i["at"]), i["trigger"], i["status"], i.get("reason") or "") for i in items]
    return items, table(rows) if items else f"{job['name']}: no fires since {args.since} ago"


_COMMANDS: dict[str, Callable[[ApiClient, argparse.Namespace], tuple[Any, str]]] = {
    "ls": _ls,
    "show": _show,
    "pause": _action("pause", _pause_body),
    "resume": _action("resume"),
    "trigger": _trigger,
    "skip": _action("skip", lambda a: {"count": a.count, **({"note": a.note} if a.note else {})}),
    "rm": _rm,
    "create": _create,
    "edit": _edit,
    "backfill": _backfill,
    "runs": _runs,
    "fires": _fires,
}


# -- helpers ---------------------------------------------------------------------------------------------
def find(client: ApiClient, ref: str) -> dict[str, Any]:
    """The job whose id or name is ``ref``."""
    if re.fullmatch(r"[0-9a-f]{32}", ref):
        try:
            return dict(client.call("GET", f"/jobs/{ref}"))
        except ApiError as exc:
            if exc.status != 404:
                raise
    for job in pages(client, "/jobs", {"limit": PAGE}):
        if job["name"] == ref:
            return dict(job)
    raise ApiError(404, f"no job has the id or the name {ref!r}")


def pages(client: ApiClient, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item of a paged listing (its ``next`` cursor followed as ``after``)."""
    after = None
    while True:
        page = client.call("GET", path, params={**params, **({"after": after} if after else {})})
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise NotTheApi(f"{client.base}{path} answered JSON without `items`; is --api a ticklock API?")
        yield from page["items"]
        after = page.get("next")
        if not after:
            return


def schedule_words(schedule: dict[str, Any]) -> str:
    if schedule["kind"] == "interval":
        return f"every {schedule['seconds']} s"
    if schedule["kind"] == "once":
        return f"once at {schedule['at']}"
    zone = schedule.get("timezone", "UTC")
    return f"cron {schedule['expr']}" + ("" if zone == "UTC" else f" ({zone})")


def state(job: dict[str, Any]) -> str:
    """The job's state and conditions as the API says them (``state``, ``conditions``); an older API's job
    is described from its fields."""
    if isinstance(job.get("state"), str):
        words = [job["state"], *job.get("conditions", [])]
    else:
        words = ["enabled" if job.get("enabled") else "paused"]
        if job.get("hold") and job["hold"]["kind"] == "skip":
            words.append("skipping")
        elif job.get("hold") and job.get("enabled"):
            words.append("held")
        if job.get("open_alerts"):
            words.append("alerting")
    if job.get("running"):
        words.append("running")
    return ", ".join(words)


def span(text: str) -> timedelta:
    """``30s``, ``15m``, ``1h``, ``2d`` as a duration."""
    found = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if not found:
        raise ValueError(f"--since must be a number and s, m, h or d (such as 1h), got {text!r}")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[found.group(2)]
    return timedelta(seconds=int(found.group(1)) * unit)


def _when(value: str | None) -> str:
    return "-" if not value else value.replace("T", " ").replace("+00:00", "Z")


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
