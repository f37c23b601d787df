"""The typed, frozen settings object, read once at start-up (``Settings.load``), and the values it derives."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ticklock.errors import ConfigError
from ticklock.handlers.plugin import Plugin, discover
from ticklock.settings.declared import RUNNER_MARGIN, SETTINGS, every_setting
from ticklock.settings.reading import check_unique, read_settings


@dataclass(frozen=True)
class Settings:
    """Every setting, typed. Build it with ``Settings.load``."""

    db: str
    store: str
    lock: str
    store_secret: str | None
    lock_secret: str | None
    host: str
    port: int
    api_token: str | None
    api_threads: int
    api_max_in_flight: int
    api_max_connections: int
    api_header_timeout: float
    api_body_timeout: float
    api_keepalive_timeout: int
    workers: int
    queue_size: int
    batch_size: int
    lookahead: float
    max_pending: int
    dispatch_resolution: float
    lease_slack: float
    shutdown_grace: float
    retention_per_job: int
    retention_days: float
    max_payload_bytes: int
    max_timeout: float
    runner_timeout: float
    max_resumes: int
    max_receives: int
    events: str
    pushgateway: str
    queue_url: str
    push_interval: float
    metrics_stale_after: float
    lock_failure: str
    email: str
    email_from: str
    webhook_secret: str | None
    webhook_timeout: float
    alerts_webhook: str
    alerts_email: str | None
    system_jobs: tuple[str, ...]
    handler_modules: tuple[str, ...]
    log_level: str
    log_format: str
    fire_log: str
    owner: str | None
    plugins: tuple[Plugin[Any], ...] = ()
    sections: Mapping[str, Any] = field(default_factory=dict)
    deprecated: tuple[str, ...] = ()  # older names that were used, as messages for the start-up log

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        plugins: Iterable[Plugin[Any]] | None = None,
    ) -> Settings:
        """Read the environment, then ``overrides`` (flag values by ``Setting.key``: the name, or
        ``plugin.name`` for a plug-in's). ``plugins`` are the ones whose settings are read too; None means
        every installed one (``ticklock.handlers.plugin.discover``, with TICKLOCK_HANDLER_MODULES). Raises
        ``ConfigError``."""
        environ = os.environ if environ is None else environ
        overrides = overrides or {}
        deprecated: list[str] = []
        values = read_settings(SETTINGS, environ, overrides, deprecated)
        runner = values["runner_timeout"]
        if runner and runner <= RUNNER_MARGIN:
            raise ConfigError(
                f"TICKLOCK_RUNNER_TIMEOUT: must be more than {RUNNER_MARGIN:g} s (the runner's own margin), "
                f"got {runner:g}"
            )
        found = discover(values["handler_modules"]) if plugins is None else tuple(plugins)
        check_unique(every_setting(found))
        sections = {p.name: p.make_config(read_settings(p.placed(), environ, overrides, deprecated)) for p in found}
        return cls(**values, plugins=found, sections=sections, deprecated=tuple(deprecated))

    def with_secrets(self, fetch: Callable[[str], str]) -> Settings:
        """These settings with TICKLOCK_STORE and TICKLOCK_LOCK taken from the secrets
        ``store_secret`` / ``lock_secret`` name (``fetch`` reads one by name), each checked as its setting
        is. ``ConfigError`` names the secret and the setting, never the value."""
        changes: dict[str, Any] = {}
        for name, secret in (("store", self.store_secret), ("lock", self.lock_secret)):
            if not secret:
                continue
            setting = next(s for s in SETTINGS if s.name == name)
            value = fetch(secret)
            if not value.strip():  # an empty store would mean SQLite, on a read-only Lambda file system
                raise ConfigError(f"the secret {secret!r} ({setting.env}) is empty")
            try:
                changes[name] = setting.parse(value)
            except ValueError as exc:
                problem = str(exc).split(", got ")[0]  # the parsers quote the value after ", got": not here
                raise ConfigError(f"the secret {secret!r} ({setting.env}): {problem}") from None
        return replace(self, **changes) if changes else self

    @property
    def store_url(self) -> str:
        """The store as a URL: TICKLOCK_STORE, or the SQLite file TICKLOCK_DB names."""
        return self.store or f"sqlite:///{self.db}"

    def section(self, name: str) -> Any:
        """The typed settings of the plug-in ``name`` (its ``config`` object). Raises ``KeyError``."""
        return self.sections[name]

    @property
    def effective_max_timeout(self) -> float:
        """The largest job timeout this deployment can honour."""
        if self.runner_timeout:
            return min(self.max_timeout, self.runner_timeout - RUNNER_MARGIN)
        return self.max_timeout

    @property
    def max_timeout_reason(self) -> str:
        """Why the limit is what it is, for the API's error message."""
        if self.runner_timeout and self.runner_timeout - RUNNER_MARGIN < self.max_timeout:
            return (
                f"the Lambda runner times out after {self.runner_timeout:g} s and keeps {RUNNER_MARGIN:g} s "
                "for recording and finalising the run"
            )
        return "TICKLOCK_MAX_TIMEOUT"

    @property
    def effective_queue_size(self) -> int:
        return self.queue_size or 2 * self.workers

    @property
    def effective_owner(self) -> str:
        return self.owner or f"{socket.gethostname()}:{os.getpid()}"

    def as_dict(self) -> dict[str, Any]:
        """The settings without the secret ones, each plug-in's under ``plugins``."""
        data: dict[str, Any] = {s.name: getattr(self, s.name) for s in SETTINGS if not s.secret}
        data["plugins"] = {
            p.name: {
                s.name: getattr(self.sections[p.name], s.name)
                for s in p.settings
                if not s.secret and hasattr(self.sections[p.name], s.name)
            }
            for p in self.plugins
            if p.settings
        }
        return data
