"""Where a setting's value comes from: its flag, then its variable, then its default, each under an older
name too (said in the start-up log as deprecated); and the check that no two settings share a name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ticklock.errors import ConfigError
from ticklock.handlers.plugin import Setting


def check_unique(settings: Iterable[Setting]) -> None:
    """``ConfigError`` when two settings (an engine's and a plug-in's, say) would read the same variable."""
    seen: dict[str, str] = {}
    for s in settings:
        for env in (s.env, *s.older_envs):
            if env in seen:
                raise ConfigError(f"two settings are read from {env}: {seen[env]} and {s.key}")
            seen[env] = s.key


def read_settings(
    settings: Iterable[Setting], environ: Mapping[str, str], overrides: Mapping[str, str], deprecated: list[str]
) -> dict[str, Any]:
    """Each setting's value by name, parsed; a use of an older name is added to ``deprecated``. Raises
    ``ConfigError`` naming the flag or variable the bad value came from."""
    values: dict[str, Any] = {}
    for setting in settings:
        raw, source = _raw(setting, environ, overrides, deprecated)
        try:
            values[setting.name] = setting.parse(raw)
        except Exception as exc:  # noqa: BLE001 - ValueError by contract; a plug-in parser's bug is named too
            raise ConfigError(f"{source}: {exc}") from None
    return values


def _raw(
    setting: Setting, environ: Mapping[str, str], overrides: Mapping[str, str], deprecated: list[str]
) -> tuple[str, str]:
    """A setting's text and where it came from: its flag, an older flag, its variable, an older variable,
    or the default (a flag wins over any variable, a new name over an older one)."""
    if setting.key in overrides:
        return overrides[setting.key], setting.flag
    candidates = [
        *(
            (flag, setting.flag, overrides.get(old))
            for flag, old in zip(setting.older_flags, setting.aliases, strict=True)
        ),
        (setting.env, None, environ.get(setting.env)),
        *((env, setting.env, environ.get(env)) for env in setting.older_envs),
    ]
    for source, new, raw in candidates:
        if raw is not None:
            if new is not None:
                deprecated.append(f"{source} is deprecated and goes in the next release: use {new}")
            return raw, source
    return setting.default, setting.env
