"""The ``ticklock`` command. Thin: parse, load settings, hand over to a runtime, map errors to exits."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from ticklock import __version__
from ticklock.commands import jobs, ui
from ticklock.domain.schedules import (
    GAP_CHOICES,
    MAX_PREVIEW,
    OVERLAP_CHOICES,
    CronSchedule,
    Fire,
    check_new_timezone,
)
from ticklock.errors import ConfigError, HandlerError, InvalidJob, StoreUnavailable
from ticklock.handlers.plugin import Plugin, Setting, discover, names
from ticklock.settings import Settings, every_setting, markdown_table

EXIT_CONFIG = 2


def _parser(settings: Sequence[Setting]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ticklock", description="A job scheduler: cron, interval and one-shot jobs with one run per fire."
    )
    parser.add_argument("--version", action="version", version=f"ticklock {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the scheduler, the REST API and /metrics in one process",
        description="Run the scheduler, the REST API and /metrics in one process. "
        "Each flag overrides its TICKLOCK_* environment variable.",
    )
    for setting in settings:
        serve.add_argument(
            setting.flag,
            dest=setting.key,
            metavar=setting.name.upper(),
            default=None,
            help=f"{setting.help} (env {setting.env}, default {setting.default!r})",
        )
        for old, flag in zip(setting.aliases, setting.older_flags, strict=True):  # deprecated, still read
            serve.add_argument(flag, dest=old, default=None, help=argparse.SUPPRESS)
    commands.add_parser("config-table", help="print the configuration reference as a Markdown table")
    cron = commands.add_parser(
        "cron",
        help="show a cron expression's next fires, with the ones a clock change moves marked",
        description="Show the next fires of a cron expression, as UTC and as wall time in its timezone. "
        "A fire a clock change moved is marked: 'gap' when its wall time did not exist and it ran as the "
        "clocks jumped, 'overlap' with the pass of a wall time that happened twice.",
    )
    cron.add_argument("expr", metavar="EXPR", help="six fields, seconds first, or a descriptor such as @hourly")
    cron.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA timezone the fields are read in (UTC)")
    cron.add_argument("--count", type=int, default=10, metavar="N", help=f"how many fires, 1-{MAX_PREVIEW} (10)")
    cron.add_argument("--after", metavar="T", help="start after this RFC 3339 instant (now)")
    cron.add_argument("--gap", choices=GAP_CHOICES, default="jump", help="spring-forward choice (jump)")
    cron.add_argument("--overlap", choices=OVERLAP_CHOICES, default="auto", help="fall-back choice (auto)")
    jobs.add_commands(commands)
    ui.add_command(commands)
    complete = commands.add_parser(
        "completion", help="print a shell completion script: source <(ticklock completion bash)"
    )
    complete.add_argument("shell", choices=("bash",))
    return parser


def _cron(args: argparse.Namespace) -> int:
    from ticklock.api.schemas.fields import parse_instant

    try:
        if not 1 <= args.count <= MAX_PREVIEW:
            raise ValueError(f"--count must be from 1 to {MAX_PREVIEW}")
        after = parse_instant(args.after) if args.after is not None else datetime.now(UTC)
        schedule = CronSchedule(args.expr, check_new_timezone(args.tz), args.gap, args.overlap)
    except (InvalidJob, ValueError) as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(preview_table(schedule.upcoming(after, args.count), schedule.timezone))
    return 0


def preview_table(fires: Sequence[Fire], zone: str) -> str:
    """The fires as a plain-text table: number, UTC, wall time with offset, and what a clock change did."""
    if not fires:
        return "no fire before the year 10000"
    rows = [("#", "UTC", f"local ({zone})", "clock change")]
    for number, fire in enumerate(fires, 1):
        note = ""
        if fire.change == "gap" and fire.scheduled is not None:
            note = f"gap: {fire.scheduled:%H:%M:%S} did not exist, ran as the clocks jumped"
        elif fire.change is not None:
            note = f"overlap: {fire.change.removeprefix('overlap-')} pass of {fire.local:%H:%M:%S}"
        rows.append((str(number), f"{fire.at:%Y-%m-%d %H:%M:%S}Z", f"{fire.local:%Y-%m-%d %H:%M:%S %z}", note))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


WITH_PLUGINS = ("serve", "config-table")  # the commands that load the plug-ins (the others import none)


def _plugins(argv: Sequence[str]) -> tuple[Plugin[object], ...]:
    """The installed plug-ins, for their flags, when the command needs them: the entry points and the
    modules TICKLOCK_HANDLER_MODULES names (one named by --handler-modules alone is loaded by
    ``Settings.load``; its settings are then read from the environment)."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command not in WITH_PLUGINS:
        return ()
    return discover(names(os.environ.get("TICKLOCK_HANDLER_MODULES", "")))


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        plugins = _plugins(argv)
    except ConfigError as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    known = every_setting(plugins)
    parser = _parser(known)
    args = parser.parse_args(argv)
    if args.command == "config-table":
        print(markdown_table(plugins))
        return 0
    if args.command == "cron":
        return _cron(args)
    if args.command == "completion":
        from ticklock.commands import completion

        print(completion.bash(parser), end="")
        return 0
    if args.command in jobs.COMMANDS:
        return jobs.run(args)
    if args.command == "ui":
        return ui.run(args)
    if args.command != "serve":
        parser.print_help()
        return 0 if args.command is None else 2
    given = vars(args)
    keys = [k for s in known for k in (s.key, *s.aliases)]
    overrides = {key: given[key] for key in keys if given.get(key) is not None}
    try:
        settings = Settings.load(overrides=overrides)
        from ticklock import logs
        from ticklock.runtimes.local import LocalService

        logs.configure(settings.log_level, settings.log_format)
        service = LocalService(settings)
        service.serve()  # seeds the plug-ins' system jobs before it listens
    except (ConfigError, HandlerError, StoreUnavailable) as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0
