"""Configuration: one typed, frozen object, read once at start-up.

Every setting has an environment variable (``TICKLOCK_*``) and a ``ticklock serve`` flag; a flag wins
over the variable. A bad value stops start-up with a message naming the variable. The engine's settings
are ``SETTINGS`` below; each installed plug-in adds its own (``ticklock.plugin``), read as
``TICKLOCK_<PLUGIN>_<NAME>`` into a typed section (``Settings.section``). The README's configuration
tables are ``ticklock config-table`` (generated from them).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ticklock.domain.dispatcher import MAX_PENDING
from ticklock.domain.jobs import LOCK_MARGIN
from ticklock.errors import ConfigError
from ticklock.plugin import (
    Plugin,
    Setting,
    choice,
    discover,
    http_url,
    integer,
    names,
    number,
    optional_text,
    store_url,
    text,
)

__all__ = ["LAMBDA_CEILING", "RUNNER_MARGIN", "SETTINGS", "Setting", "Settings", "every_setting", "markdown_table"]

# seconds of a Lambda runner's timeout kept for decoding, locking, recording and the final write (whose
# retries through a store outage take up to 15.5 s) around the job's own timeout
RUNNER_MARGIN = 30.0
LAMBDA_CEILING = 900.0  # Lambda's 15-minute limit on any invocation
ALL = "all"  # TICKLOCK_SYSTEM_JOBS: every system job the installed plug-ins declare


def _lock(text: str) -> str:
    value = text.strip()
    if value != "local" and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"must be local, redis://..., rediss://... or unix://..., got {text!r}")
    return value


def _events(text: str) -> str:
    value = text.strip()
    if value.lower() in ("none", "log"):
        return value.lower()
    if value.startswith("eventbridge:") and len(value) > len("eventbridge:"):
        return value
    raise ValueError(f"must be none, log or eventbridge:<bus name or ARN>, got {text!r}")


def _email(text: str) -> str:
    text = text.strip()
    if text and text != "ses" and not text.startswith(("smtp://", "smtps://")):
        raise ValueError(f"expected empty, ses, or an smtp:// / smtps:// URL, got {text!r}")
    return text


_CPU_PART = re.compile(r"([0-9]+)(?:-([0-9]+))?")
MAX_CPU = 8191  # the highest CPU number Linux builds for (CONFIG_NR_CPUS is at most 8,192)


def _cpu(digits: str) -> int:
    # past MAX_CPU either way; and int() would refuse a number of over 4,300 digits with a message of its own
    return int(digits) if len(digits) <= 6 else MAX_CPU + 1


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "...")


def cpu_list(text: str, expected: str = "CPU numbers and ranges such as 0,2-3") -> tuple[int, ...]:
    """CPU numbers and ranges (``0,2-3``), as the CPUs they name, sorted; empty for none given (``expected``:
    what an error says was expected). Whether this process may run on them is checked where they are
    applied (``runtimes.local.place_engine``)."""
    if not text.strip():
        return ()
    ranges = []
    for part in text.split(","):
        match = _CPU_PART.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"expected {expected}, got {_shown(text)}")
        first, last = _cpu(match[1]), _cpu(match[2] or match[1])
        if last > MAX_CPU:
            raise ValueError(f"CPUs are numbered 0 to {MAX_CPU}, got {_shown(part.strip())} in {_shown(text)}")
        if last < first:
            raise ValueError(
                f"a range runs from the lower CPU to the higher, got {_shown(part.strip())} in {_shown(text)}"
            )
        ranges.append((first, last))
    cpus: list[int] = []
    upto = -1  # the ranges merged, so that a long list of wide ranges costs no more than 8,192 CPUs
    for first, last in sorted(ranges):
        cpus.extend(range(max(first, upto + 1), last + 1))
        upto = max(upto, last)
    return tuple(cpus)


Cpus = Literal["auto", "any"] | tuple[int, ...]  # the engine's CPUs: one chosen at start, wherever, or these


def cpu_choice(text: str) -> Cpus:
    """TICKLOCK_CPUS: ``auto`` (one CPU for the engine, chosen at start), ``any`` or empty (no keeping), or
    CPU numbers and ranges (``cpu_list``)."""
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    if word in ("any", ""):
        return "any"
    return cpu_list(text, expected="auto, any, or CPU numbers and ranges such as 0,2-3")


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "ticklock.db", text, "SQLite file of the embedded store (created if missing)"),
    Setting("store", "", store_url, "the store: empty = SQLite at TICKLOCK_DB, sqlite:///PATH, or a mongodb:// URI"),
    Setting("lock", "local", _lock, "the lock: local (one process) or a redis:// / rediss:// URL (replicas)"),
    Setting(
        "store_secret",
        "",
        optional_text,
        "AWS: the Secrets Manager secret whose value is TICKLOCK_STORE, read by the functions at cold start",
    ),
    Setting(
        "lock_secret",
        "",
        optional_text,
        "AWS: the Secrets Manager secret whose value is TICKLOCK_LOCK, read by the functions at cold start",
    ),
    Setting("host", "127.0.0.1", text, "address the API listens on; without an API token it is forced to 127.0.0.1"),
    Setting("port", "8080", integer(1, 65535), "port of the REST API and /metrics"),
    Setting(
        "api_token", "", optional_text, "bearer token the API requires; empty = no auth, loopback only", secret=True
    ),
    Setting(
        "api_threads", "8", integer(1, 256), "threads that run API requests needing the store (others have their own)"
    ),
    Setting(
        "api_max_in_flight",
        "512",
        integer(1, 100_000),
        "API requests handled at once; beyond it a fast 503 with Retry-After",
    ),
    Setting(
        "api_max_connections",
        "2048",
        integer(16, 1_000_000),
        "open API connections at most; past it the oldest idle one is closed",
    ),
    Setting(
        "api_header_timeout", "10", number(0.1, 600.0), "seconds a client has to send a request's line and headers"
    ),
    Setting("api_body_timeout", "30", number(0.1, 3600.0), "seconds a client has to send a request's body (408 after)"),
    Setting("api_keepalive_timeout", "5", integer(1, 3600), "seconds an idle keep-alive connection stays open"),
    Setting("workers", "30", integer(1, 1000), "worker threads that run fires"),
    Setting("queue_size", "0", integer(0, 100_000), "fires waiting for a worker at most; 0 = twice the workers"),
    Setting("batch_size", "100", integer(1, 10_000), "jobs claimed per store round trip"),
    Setting("lookahead", "1.0", number(0.0, 10.0), "seconds ahead a due job is claimed, to start it on time"),
    Setting(
        "max_pending",
        str(MAX_PENDING),
        integer(1, 1_000_000),
        "claimed fires held for their time at most (a burst on one instant is claimed this far ahead)",
    ),
    Setting(
        "dispatch_resolution",
        "0.02",
        number(0.0, 1.0),
        "seconds a due fire may wait to be handed over with the others due by then, at most "
        "(0: each at its instant; less while a batch fills sooner)",
    ),
    Setting(
        "lease_slack",
        "60",
        number(1.0, 3600.0),
        "seconds a claim outlives its horizon + timeout (at least 6 + lookahead)",
    ),
    Setting(
        "cpus",
        "auto",
        cpu_choice,
        "ticklock serve on Linux: the CPUs the engine's threads keep to (handlers run on every CPU the process "
        "may use): auto = one no other serve here holds; any = wherever the OS runs them; or CPUs such as 1 "
        "or 0,2-3 (README, 'Configuration')",
    ),
    Setting("shutdown_grace", "30", number(0.0, 3600.0), "seconds running fires get to finish on SIGTERM"),
    Setting("retention_per_job", "1000", integer(1, 10_000_000), "finished executions kept per job"),
    Setting("retention_days", "30", number(0.001, 36_500.0), "finished executions older than this are pruned"),
    Setting("max_payload_bytes", "65536", integer(2, 16 * 1024 * 1024), "largest job payload accepted, as JSON"),
    Setting("max_timeout", "86400", number(1.0, 7 * 86400.0), "largest job timeout accepted, in seconds"),
    Setting(
        "runner_timeout",
        "0",
        number(0.0, LAMBDA_CEILING),
        f"the Lambda runner's timeout (the Lambda deployment; 0 = not on Lambda): jobs' timeouts must leave "
        f"{RUNNER_MARGIN:g} s of it",
    ),
    Setting(
        "max_resumes",
        "3",
        integer(0, 100),
        "times a fire cut off mid-run is run again on its execution; then (or at 0, as on Lambda) it is lost",
    ),
    Setting(
        "max_receives",
        "5",
        integer(1, 1000),
        "deliveries of one SQS message before it is dead-lettered (the queue's maxReceiveCount)",
    ),
    Setting("events", "none", _events, "where execution events go: none, log, or eventbridge:<bus>"),
    Setting("pushgateway", "", http_url, "push metrics to this Pushgateway URL (for processes nobody scrapes)"),
    Setting("queue_url", "", http_url, "SQS queue between the tick and runner functions (the Lambda deployment)"),
    Setting("push_interval", "15", number(1.0, 3600.0), "seconds between metric pushes"),
    Setting(
        "metrics_stale_after", "600", number(10.0, 86400.0), "Pushgateway groups not pushed for this long are deleted"
    ),
    Setting(
        "lock_failure",
        "skip",
        choice("skip", "run"),
        "when the lock backend fails: skip the fire (counted) or run it (the store still allows one run)",
    ),
    Setting(
        "email",
        "",
        _email,
        "the engine's email notifier: empty = none, smtp://user:pass@host:587, smtps://…:465, or ses",
        secret=True,
    ),
    Setting("email_from", "ticklock@localhost", text, "the From address of the emails ticklock sends"),
    Setting(
        "webhook_secret",
        "",
        optional_text,
        "the key the webhook notifier signs its calls with (HMAC-SHA256); empty = unsigned",
        secret=True,
    ),
    Setting("webhook_timeout", "10", number(0.1, 300.0), "seconds a webhook call may take, all of it"),
    Setting(
        "alerts_webhook",
        "",
        http_url,
        "where a job's alerts are posted when it names no webhook of its own (empty: nowhere)",
        secret=True,
    ),
    Setting(
        "alerts_email", "", optional_text, "who gets a job's alerts when it names no address of its own (empty: nobody)"
    ),
    Setting(
        "system_jobs",
        ALL,
        names,
        "system jobs the plug-ins declare that are seeded at boot, by handler name: all, or a list (empty = none)",
    ),
    Setting(
        "handler_modules",
        "",
        names,
        "comma-separated modules that add handlers: a plugin object, or a register(registry) function",
    ),
    Setting("log_level", "INFO", choice("debug", "info", "warning", "error"), "log level"),
    Setting("log_format", "json", choice("json", "text"), "json: one object per line; text: for humans"),
    Setting(
        "fire_log",
        "summary",
        choice("summary", "each"),
        "fires that run without trouble: summary (one fires.summary line a second) or each (a started and a "
        "finished line per fire); failures and skips are logged per fire either way",
    ),
    Setting("owner", "", optional_text, "this process's name in leases and executions (default host:pid)"),
)


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
    cpus: Cpus
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
        every installed one (``ticklock.plugin.discover``, with TICKLOCK_HANDLER_MODULES). Raises
        ``ConfigError``."""
        environ = os.environ if environ is None else environ
        overrides = overrides or {}
        deprecated: list[str] = []
        values = _read(SETTINGS, environ, overrides, deprecated)
        # A fire starts only if its lease outlasts its deadline plus the lock's margin; a fire is claimed
        # up to `lookahead` early. A shorter slack would make every fire skip as lease_expired.
        least = LOCK_MARGIN + values["lookahead"] + 1.0
        if values["lease_slack"] < least:
            name = "--lease-slack" if "lease_slack" in overrides else "TICKLOCK_LEASE_SLACK"
            raise ConfigError(
                f"{name}: must be at least {least:g} s (the lock margin of {LOCK_MARGIN:g} s, the "
                f"look-ahead and 1 s of queueing), got {values['lease_slack']:g}"
            )
        runner = values["runner_timeout"]
        if runner and runner <= RUNNER_MARGIN:
            raise ConfigError(
                f"TICKLOCK_RUNNER_TIMEOUT: must be more than {RUNNER_MARGIN:g} s (the runner's own margin), "
                f"got {runner:g}"
            )
        found = discover(values["handler_modules"]) if plugins is None else tuple(plugins)
        _check_unique(every_setting(found))
        sections = {p.name: p.make_config(_read(p.placed(), environ, overrides, deprecated)) for p in found}
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


def every_setting(plugins: Iterable[Plugin[Any]] = ()) -> tuple[Setting, ...]:
    """The engine's settings, then each plug-in's, placed in its section."""
    return SETTINGS + tuple(s for p in plugins for s in p.placed())


def _check_unique(settings: Iterable[Setting]) -> None:
    seen: dict[str, str] = {}
    for s in settings:
        for env in (s.env, *s.older_envs):
            if env in seen:
                raise ConfigError(f"two settings are read from {env}: {seen[env]} and {s.key}")
            seen[env] = s.key


def _read(
    settings: Iterable[Setting], environ: Mapping[str, str], overrides: Mapping[str, str], deprecated: list[str]
) -> dict[str, Any]:
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
