"""Configuration: one typed, frozen object, read once at start-up.

Every setting has an environment variable (``TICKLOCK_*``) and a ``ticklock serve`` flag; a flag wins
over the variable. A bad value stops start-up with a message naming the variable. The README's
configuration table is ``python -m ticklock.settings`` (generated from ``SETTINGS`` below).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ticklock.domain.jobs import LOCK_MARGIN
from ticklock.errors import ConfigError

SECRET = ("api_token", "email", "vendor_key")  # kept out of logs: tokens, passwords in URLs, keys
# seconds of a Lambda runner's timeout kept for decoding, locking, recording and the final write (whose
# retries through a store outage take up to 15.5 s) around the job's own timeout
RUNNER_MARGIN = 30.0
LAMBDA_CEILING = 900.0  # Lambda's 15-minute limit on any invocation

Parser = Callable[[str], Any]


def _int(low: int, high: int) -> Parser:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _float(low: float, high: float) -> Parser:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _choice(*options: str) -> Parser:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}, got {text!r}")
        return value

    return parse


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


def _optional_text(text: str) -> str | None:
    return text.strip() or None


def _store(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("sqlite:///", "mongodb://", "mongodb+srv://")):
        raise ValueError(f"must be sqlite:///PATH, mongodb://... or mongodb+srv://..., got {text!r}")
    if value == "sqlite:///":
        raise ValueError("sqlite:/// needs a path, e.g. sqlite:///var/lib/ticklock.db")
    return value


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


def _url(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL, got {text!r}")
    return value


def _email(text: str) -> str:
    text = text.strip()
    if text and text != "ses" and not text.startswith(("smtp://", "smtps://")):
        raise ValueError(f"expected empty, ses, or an smtp:// / smtps:// URL, got {text!r}")
    return text


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    parse: Parser
    help: str

    @property
    def env(self) -> str:
        return f"TICKLOCK_{self.name.upper()}"

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "ticklock.db", _text, "SQLite file of the embedded store (created if missing)"),
    Setting("store", "", _store, "the store: empty = SQLite at TICKLOCK_DB, sqlite:///PATH, or a mongodb:// URI"),
    Setting("lock", "local", _lock, "the lock: local (one process) or a redis:// / rediss:// URL (replicas)"),
    Setting("host", "127.0.0.1", _text, "address the API listens on; without an API token it is forced to 127.0.0.1"),
    Setting("port", "8080", _int(1, 65535), "port of the REST API and /metrics"),
    Setting("api_token", "", _optional_text, "bearer token the API requires; empty = no auth, loopback only"),
    Setting(
        "api_threads", "8", _int(1, 256), "threads that run API requests needing the store (others have their own)"
    ),
    Setting(
        "api_max_in_flight",
        "512",
        _int(1, 100_000),
        "API requests handled at once; beyond it a fast 503 with Retry-After",
    ),
    Setting(
        "api_max_connections",
        "2048",
        _int(16, 1_000_000),
        "open API connections at most; past it the oldest idle one is closed",
    ),
    Setting(
        "api_header_timeout", "10", _float(0.1, 600.0), "seconds a client has to send a request's line and headers"
    ),
    Setting("api_body_timeout", "30", _float(0.1, 3600.0), "seconds a client has to send a request's body (408 after)"),
    Setting("api_keepalive_timeout", "5", _int(1, 3600), "seconds an idle keep-alive connection stays open"),
    Setting("workers", "30", _int(1, 1000), "worker threads that run fires"),
    Setting("queue_size", "0", _int(0, 100_000), "fires waiting for a worker at most; 0 = twice the workers"),
    Setting("batch_size", "100", _int(1, 10_000), "jobs claimed per store round trip"),
    Setting("lookahead", "1.0", _float(0.0, 10.0), "seconds ahead a due job is claimed, to start it on time"),
    Setting(
        "lease_slack",
        "60",
        _float(1.0, 3600.0),
        "seconds a claim outlives its horizon + timeout (at least 6 + lookahead)",
    ),
    Setting("shutdown_grace", "30", _float(0.0, 3600.0), "seconds running fires get to finish on SIGTERM"),
    Setting("retention_per_job", "1000", _int(1, 10_000_000), "finished executions kept per job"),
    Setting("retention_days", "30", _float(0.001, 36_500.0), "finished executions older than this are pruned"),
    Setting("max_payload_bytes", "65536", _int(2, 16 * 1024 * 1024), "largest job payload accepted, as JSON"),
    Setting("max_timeout", "86400", _float(1.0, 7 * 86400.0), "largest job timeout accepted, in seconds"),
    Setting(
        "runner_timeout",
        "0",
        _float(0.0, LAMBDA_CEILING),
        f"the Lambda runner's timeout (the Lambda deployment; 0 = not on Lambda): jobs' timeouts must leave "
        f"{RUNNER_MARGIN:g} s of it",
    ),
    Setting(
        "max_resumes",
        "3",
        _int(0, 100),
        "times a fire cut off mid-run is run again on its execution; then (or at 0, as on Lambda) it is lost",
    ),
    Setting(
        "max_receives",
        "5",
        _int(1, 1000),
        "deliveries of one SQS message before it is dead-lettered (the queue's maxReceiveCount)",
    ),
    Setting("events", "none", _events, "where execution events go: none, log, or eventbridge:<bus>"),
    Setting("pushgateway", "", _url, "push metrics to this Pushgateway URL (for processes nobody scrapes)"),
    Setting("queue_url", "", _url, "SQS queue between the tick and runner functions (the Lambda deployment)"),
    Setting("push_interval", "15", _float(1.0, 3600.0), "seconds between metric pushes"),
    Setting(
        "metrics_stale_after", "600", _float(10.0, 86400.0), "Pushgateway groups not pushed for this long are deleted"
    ),
    Setting(
        "lock_failure",
        "skip",
        _choice("skip", "run"),
        "when the lock backend fails: skip the fire (counted) or run it (the store still allows one run)",
    ),
    Setting(
        "product_store",
        "",
        _store,
        "where the product handlers' data lives (alerts, parts, notifications): empty = the job store",
    ),
    Setting(
        "email",
        "",
        _email,
        "how alert emails go: empty = not sent (kept pending), smtp://user:pass@host:587, smtps://…:465, or ses",
    ),
    Setting("email_from", "ticklock@localhost", _text, "the From address of alert emails"),
    Setting(
        "system_jobs",
        "alerts.scan,catalogue.spot_prices",
        _names,
        "system jobs seeded at boot, by handler name (empty = none; the walk only with a vendor URL)",
    ),
    Setting("alerts_every", "86400", _int(60, 30 * 86400), "seconds between alert scans (the seeded job's interval)"),
    Setting("vendor_url", "", _url, "the spot-price vendor's API base URL (the catalogue walk)"),
    Setting("vendor_key", "", _optional_text, "the vendor's API key (sent as X-Api-Key)"),
    Setting("vendor_batch", "50", _int(1, 1000), "parts priced per vendor request"),
    Setting("vendor_daily_quota", "1000", _int(1, 10_000_000), "vendor requests allowed per UTC day, all processes"),
    Setting("catalogue_every", "3600", _int(60, 30 * 86400), "seconds between catalogue walks (the seeded job)"),
    Setting("handler_modules", "", _names, "comma-separated modules whose register(registry) adds handlers"),
    Setting("log_level", "INFO", _choice("debug", "info", "warning", "error"), "log level"),
    Setting("log_format", "json", _choice("json", "text"), "json: one object per line; text: for humans"),
    Setting("owner", "", _optional_text, "this process's name in leases and executions (default host:pid)"),
)


@dataclass(frozen=True)
class Settings:
    """Every setting, typed. Build it with ``Settings.load``."""

    db: str
    store: str
    lock: str
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
    product_store: str
    email: str
    email_from: str
    system_jobs: tuple[str, ...]
    alerts_every: int
    vendor_url: str
    vendor_key: str | None
    vendor_batch: int
    vendor_daily_quota: int
    catalogue_every: int
    handler_modules: tuple[str, ...]
    log_level: str
    log_format: str
    owner: str | None

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None) -> Settings:
        """Read the environment, then ``overrides`` (flag values by setting name). Raises ``ConfigError``."""
        environ = os.environ if environ is None else environ
        overrides = overrides or {}
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            if setting.name in overrides:
                raw, source = overrides[setting.name], setting.flag
            else:
                raw, source = environ.get(setting.env, setting.default), setting.env
            try:
                values[setting.name] = setting.parse(raw)
            except ValueError as exc:
                raise ConfigError(f"{source}: {exc}") from None
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
        return cls(**values)

    @property
    def store_url(self) -> str:
        """The store as a URL: TICKLOCK_STORE, or the SQLite file TICKLOCK_DB names."""
        return self.store or f"sqlite:///{self.db}"

    @property
    def product_store_url(self) -> str:
        """Where the product handlers' data lives: TICKLOCK_PRODUCT_STORE, else the job store."""
        return self.product_store or self.store_url

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
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in SECRET}


def markdown_table() -> str:
    rows = ["| variable | flag | default | meaning |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        rows.append(f"| `{s.env}` | `{s.flag}` | `{s.default}` | {s.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
