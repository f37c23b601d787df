"""The ``ticklock`` command. Thin: parse, load settings, hand over to a runtime, map errors to exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ticklock import __version__
from ticklock.errors import ConfigError, HandlerError, StoreUnavailable
from ticklock.settings import SETTINGS, Settings, markdown_table

EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
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
    for setting in SETTINGS:
        serve.add_argument(
            setting.flag,
            dest=setting.name,
            metavar=setting.name.upper(),
            default=None,
            help=f"{setting.help} (env {setting.env}, default {setting.default!r})",
        )
    commands.add_parser("config-table", help="print the configuration reference as a Markdown table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "config-table":
        print(markdown_table())
        return 0
    if args.command != "serve":
        parser.print_help()
        return 0 if args.command is None else 2
    overrides = {s.name: getattr(args, s.name) for s in SETTINGS if getattr(args, s.name) is not None}
    try:
        settings = Settings.load(overrides=overrides)
        from ticklock import logs
        from ticklock.runtimes.local import LocalService

        logs.configure(settings.log_level, settings.log_format)
        service = LocalService(settings)
    except (ConfigError, HandlerError, StoreUnavailable) as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    service.serve()
    return 0
