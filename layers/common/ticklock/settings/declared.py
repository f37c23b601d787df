"""Every setting the engine declares: its name, default, parser and help, in the order the README lists
them. A plug-in's own come after, each in its section (``every_setting``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ticklock.engine.dispatcher import MAX_PENDING
from ticklock.handlers.plugin import (
    Plugin,
    Setting,
    choice,
    http_url,
    integer,
    names,
    number,
    optional_text,
    store_url,
    text,
)
from ticklock.settings.parsers import email_notifier, events_sink, lock_url

# seconds of a Lambda runner's timeout kept for decoding, locking, recording and the final write (whose
# retries through a store outage take up to 15.5 s) around the job's own timeout
RUNNER_MARGIN = 30.0
LAMBDA_CEILING = 900.0  # Lambda's 15-minute limit on any invocation
ALL = "all"  # TICKLOCK_SYSTEM_JOBS: every system job the installed plug-ins declare


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "ticklock.db", text, "SQLite file of the embedded store (created if missing)"),
    Setting("store", "", store_url, "the store: empty = SQLite at TICKLOCK_DB, sqlite:///PATH, or a mongodb:// URI"),
    Setting("lock", "local", lock_url, "the lock: local (one process) or a redis:// / rediss:// URL (replicas)"),
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
        "6",
        number(3.0, 3600.0),
        "seconds a claim and a job's lock last past the heartbeat that keeps them (every third of it)",
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
    Setting("events", "none", events_sink, "where execution events go: none, log, or eventbridge:<bus>"),
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
        email_notifier,
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


def every_setting(plugins: Iterable[Plugin[Any]] = ()) -> tuple[Setting, ...]:
    """The engine's settings, then each plug-in's, placed in its section."""
    return SETTINGS + tuple(s for p in plugins for s in p.placed())
