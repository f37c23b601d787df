"""The README's configuration tables, generated from the settings (``ticklock config-table``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ticklock.handlers.plugin import Plugin, Setting
from ticklock.settings.declared import SETTINGS


def markdown_table(plugins: Iterable[Plugin[Any]] = ()) -> str:
    """The engine's settings as a Markdown table, then a section and a table for each plug-in's."""

    def table(settings: Iterable[Setting]) -> list[str]:
        rows = ["| variable | flag | default | meaning |", "| --- | --- | --- | --- |"]
        for s in settings:
            older = f" (formerly `{', '.join(s.older_envs)}`)" if s.aliases else ""
            secret = " (secret: kept out of logs)" if s.secret else ""
            rows.append(f"| `{s.env}` | `{s.flag}` | `{s.default}` | {s.help}{older}{secret} |")
        return rows

    parts = table(SETTINGS)
    for p in plugins:
        if p.settings:
            parts += ["", f"#### Plug-in `{p.name}`" + (f": {p.description}" if p.description else ""), ""]
            parts += table(p.placed())
    return "\n".join(parts)
