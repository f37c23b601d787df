"""Settings: defaults, TICKLOCK_* variables, flags win, every bad value names its variable or flag."""

from __future__ import annotations

import os
import socket
from dataclasses import fields

import pytest

from ticklock.errors import ConfigError
from ticklock.settings import SETTINGS, Settings, markdown_table

BY_NAME = {s.name: s for s in SETTINGS}

# Values each setting must refuse. Settings that accept anything (api_token, owner, handler_modules,
# webhook_secret) have no entry.
BAD_VALUES: dict[str, list[str]] = {
    "db": ["", "   "],
    "host": ["", "  "],
    "port": ["abc", "-1", "0", "65536", "80.5", ""],
    "workers": ["0", "1001", "many"],
    "queue_size": ["-1", "100001", "x"],
    "batch_size": ["0", "10001", "1e3"],
    "lookahead": ["-0.1", "10.1", "soon", "nan"],
    "max_pending": ["0", "1000001", "lots"],
    "lease_slack": ["0.5", "3601", "inf"],
    "shutdown_grace": ["-1", "3601", "later"],
    "retention_per_job": ["0", "10000001", "all"],
    "retention_days": ["0", "36501", "forever"],
    "max_payload_bytes": ["1", str(16 * 1024 * 1024 + 1), "64k"],
    "max_timeout": ["0.5", str(7 * 86400 + 1), "day"],
    "events": ["kafka", "", "eventbridge:", "sns:topic"],
    "store": ["postgres://x", "sqlite://relative.db", "sqlite:///", "mongodb:/nohost"],
    "lock": ["", "memcached://x", "redis:/x", "inprocess"],
    "pushgateway": ["ftp://x", "localhost:9091"],
    "queue_url": ["sqs://queue", "queue-name"],
    "push_interval": ["0", "3601", "often"],
    "metrics_stale_after": ["5", "86401", "x"],
    "lock_failure": ["retry", ""],
    "webhook_timeout": ["0", "300.5", "soon", "nan"],
    "log_level": ["verbose", "trace", ""],
    "log_format": ["xml", ""],
}
BAD_CASES = [(name, value) for name, values in BAD_VALUES.items() for value in values]


def test_adapters_are_chosen_by_urls() -> None:
    s = Settings.load(
        environ={
            "TICKLOCK_STORE": "mongodb://db:27017/ticklock",
            "TICKLOCK_LOCK": "rediss://:pw@r:6380/0",
            "TICKLOCK_EVENTS": "eventbridge:ticklock-bus",
            "TICKLOCK_PUSHGATEWAY": "http://pg:9091",
        }
    )
    assert s.store_url == "mongodb://db:27017/ticklock"
    assert s.lock == "rediss://:pw@r:6380/0"
    assert s.events == "eventbridge:ticklock-bus"
    assert s.pushgateway == "http://pg:9091"
    assert Settings.load(environ={"TICKLOCK_DB": "/var/lib/t.db"}).store_url == "sqlite:////var/lib/t.db"
    assert (
        Settings.load(environ={"TICKLOCK_STORE": "sqlite:///x.db", "TICKLOCK_DB": "y.db"}).store_url == "sqlite:///x.db"
    )


def test_defaults() -> None:
    s = Settings.load(environ={})
    assert s.db == "ticklock.db"
    assert s.host == "127.0.0.1"
    assert s.port == 8080
    assert s.api_token is None
    assert s.workers == 30
    assert s.queue_size == 0
    assert s.effective_queue_size == 60
    assert s.batch_size == 100
    assert s.lookahead == 1.0
    assert s.lease_slack == 6.0
    assert s.shutdown_grace == 30.0
    assert s.retention_per_job == 1000
    assert s.retention_days == 30.0
    assert s.max_payload_bytes == 65536
    assert s.max_timeout == 86400.0
    assert s.events == "none"
    assert s.lock_failure == "skip"
    assert s.handler_modules == ()
    assert s.log_level == "info"
    assert s.log_format == "json"
    assert s.owner is None
    assert s.effective_owner == f"{socket.gethostname()}:{os.getpid()}"


def test_every_settings_field_has_a_setting() -> None:
    plugged = ("plugins", "sections", "deprecated")  # the plug-ins found, their settings, older names used
    assert [f.name for f in fields(Settings) if f.name not in plugged] == [s.name for s in SETTINGS]


def test_env_and_flag_names() -> None:
    assert BY_NAME["port"].env == "TICKLOCK_PORT"
    assert BY_NAME["port"].flag == "--port"
    assert BY_NAME["max_payload_bytes"].env == "TICKLOCK_MAX_PAYLOAD_BYTES"
    assert BY_NAME["max_payload_bytes"].flag == "--max-payload-bytes"


def test_environment_variables_are_read() -> None:
    s = Settings.load(
        environ={
            "TICKLOCK_DB": "/data/jobs.db",
            "TICKLOCK_HOST": "0.0.0.0",
            "TICKLOCK_PORT": "9000",
            "TICKLOCK_API_TOKEN": "  tok  ",
            "TICKLOCK_WORKERS": "4",
            "TICKLOCK_QUEUE_SIZE": "7",
            "TICKLOCK_LOOKAHEAD": "0.25",
            "TICKLOCK_EVENTS": "LOG",
            "TICKLOCK_LOCK_FAILURE": "run",
            "TICKLOCK_HANDLER_MODULES": "a.b, c ,,d",
            "TICKLOCK_LOG_LEVEL": "DEBUG",
            "TICKLOCK_LOG_FORMAT": "text",
            "TICKLOCK_OWNER": "node-1",
        },
        plugins=(),  # the modules named are not imported: only the parsing is under test
    )
    assert s.db == "/data/jobs.db"
    assert s.host == "0.0.0.0"
    assert s.port == 9000
    assert s.api_token == "tok"
    assert s.workers == 4
    assert s.queue_size == 7
    assert s.effective_queue_size == 7
    assert s.lookahead == 0.25
    assert s.events == "log"
    assert s.lock_failure == "run"
    assert s.handler_modules == ("a.b", "c", "d")
    assert s.log_level == "debug"
    assert s.log_format == "text"
    assert s.owner == "node-1"
    assert s.effective_owner == "node-1"


def test_effective_queue_size_is_twice_the_workers_when_zero() -> None:
    assert Settings.load(environ={"TICKLOCK_WORKERS": "7"}).effective_queue_size == 14


def test_empty_optional_values_mean_none() -> None:
    s = Settings.load(environ={"TICKLOCK_API_TOKEN": "   ", "TICKLOCK_OWNER": ""})
    assert s.api_token is None
    assert s.owner is None


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKLOCK_PORT", "9123")
    monkeypatch.setenv("TICKLOCK_WORKERS", "3")
    s = Settings.load()
    assert s.port == 9123
    assert s.workers == 3


def test_flag_overrides_win_over_the_environment() -> None:
    s = Settings.load(
        environ={"TICKLOCK_PORT": "9000", "TICKLOCK_WORKERS": "4"},
        overrides={"port": "9100"},
    )
    assert s.port == 9100
    assert s.workers == 4  # not overridden: the variable still applies


def test_flag_override_wins_even_over_a_bad_variable() -> None:
    s = Settings.load(environ={"TICKLOCK_PORT": "not-a-port"}, overrides={"port": "9100"})
    assert s.port == 9100


def test_flag_override_without_env_replaces_the_default() -> None:
    assert Settings.load(environ={}, overrides={"db": "other.db"}).db == "other.db"


@pytest.mark.parametrize(("name", "value"), BAD_CASES)
def test_bad_environment_value_names_the_variable(name: str, value: str) -> None:
    setting = BY_NAME[name]
    with pytest.raises(ConfigError) as info:
        Settings.load(environ={setting.env: value})
    message = str(info.value)
    assert setting.env in message
    assert setting.flag not in message.replace(setting.env, "")


@pytest.mark.parametrize(("name", "value"), BAD_CASES)
def test_bad_flag_value_names_the_flag(name: str, value: str) -> None:
    setting = BY_NAME[name]
    with pytest.raises(ConfigError) as info:
        Settings.load(environ={}, overrides={name: value})
    message = str(info.value)
    assert setting.flag in message
    assert setting.env not in message


def test_bad_port_message_says_what_is_wrong() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.load(environ={"TICKLOCK_PORT": "70000"})
    assert "TICKLOCK_PORT" in str(info.value)
    assert "65535" in str(info.value)
    with pytest.raises(ConfigError) as info:
        Settings.load(environ={}, overrides={"port": "abc"})
    assert "--port" in str(info.value)
    assert "'abc'" in str(info.value)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_default_is_valid(name: str) -> None:
    setting = BY_NAME[name]
    setting.parse(setting.default)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("port", "1", 1),
        ("port", "65535", 65535),
        ("workers", "1", 1),
        ("workers", "1000", 1000),
        ("lookahead", "0", 0.0),
        ("lookahead", "10", 10.0),
        ("max_payload_bytes", "2", 2),
    ],
)
def test_range_bounds_are_inclusive(name: str, value: str, expected: object) -> None:
    s = Settings.load(environ={BY_NAME[name].env: value})
    assert getattr(s, name) == expected


def test_as_dict_hides_the_api_token_the_email_url_the_webhook_key_and_the_alerts_url() -> None:
    s = Settings.load(
        environ={
            "TICKLOCK_API_TOKEN": "secret-value",
            "TICKLOCK_EMAIL": "smtp://me:mail-password@mail:587",
            "TICKLOCK_WEBHOOK_SECRET": "hook-key",
            "TICKLOCK_ALERTS_WEBHOOK": "https://hooks.example/T0/url-token",  # such URLs carry their key
        }
    )
    data = s.as_dict()
    assert "api_token" not in data
    assert "secret-value" not in repr(data) and "mail-password" not in repr(data) and "hook-key" not in repr(data)
    assert "url-token" not in repr(data)
    assert data["port"] == 8080
    hidden = {"api_token", "email", "webhook_secret", "alerts_webhook"}
    assert set(data) == {s.name for s in SETTINGS} - hidden | {"plugins"}


def test_email_is_smtp_or_ses_or_nothing() -> None:
    assert Settings.load(environ={"TICKLOCK_EMAIL": "ses"}).email == "ses"
    assert Settings.load(environ={}).email == ""
    with pytest.raises(ConfigError, match="TICKLOCK_EMAIL: expected empty, ses, or an smtp://"):
        Settings.load(environ={"TICKLOCK_EMAIL": "sendmail"})


def test_settings_are_frozen() -> None:
    s = Settings.load(environ={})
    with pytest.raises(AttributeError):
        s.port = 1  # type: ignore[misc]


def test_markdown_table_lists_every_setting() -> None:
    table = markdown_table()
    lines = table.splitlines()
    assert lines[0].startswith("| variable | flag | default |")
    assert len(lines) == len(SETTINGS) + 2  # no plug-in given: the engine's table alone
    for setting in SETTINGS:
        row = next(line for line in lines if f"`{setting.env}`" in line)
        assert f"`{setting.flag}`" in row
        assert f"`{setting.default}`" in row
        assert setting.help in row


def test_lease_slack_leaves_the_heartbeat_a_second_between_beats() -> None:
    # the heartbeat beats every third of the lease: under 3 s it would beat more than once a second
    with pytest.raises(ConfigError, match=r"TICKLOCK_LEASE_SLACK"):
        Settings.load(environ={"TICKLOCK_LEASE_SLACK": "2.5"})
    assert Settings.load(environ={"TICKLOCK_LEASE_SLACK": "3"}).lease_slack == 3.0


def test_the_store_and_lock_come_from_their_secrets_checked_and_never_echoed() -> None:
    names = {"TICKLOCK_STORE_SECRET": "app/store", "TICKLOCK_LOCK_SECRET": "app/lock"}
    settings = Settings.load(environ=names, plugins=())
    values = {"app/store": "mongodb://u:pw@db:27017/ticklock", "app/lock": "rediss://:pw@r:6380/0"}
    read = settings.with_secrets(values.__getitem__)
    assert (read.store, read.lock, read.store_url) == (values["app/store"], values["app/lock"], values["app/store"])
    with pytest.raises(ConfigError) as bad:
        settings.with_secrets({"app/store": "postgres://u:hunter2@db/x", "app/lock": "local"}.__getitem__)
    assert "app/store" in str(bad.value) and "TICKLOCK_STORE" in str(bad.value) and "hunter2" not in str(bad.value)
    plain = Settings.load(environ={}, plugins=())
    assert plain.with_secrets(lambda name: pytest.fail(f"read {name}")) is plain  # no secret named: none read


def test_max_pending_bounds_the_fires_the_dispatcher_holds() -> None:
    from ticklock.adapters.metrics.prometheus import PrometheusMetrics
    from ticklock.adapters.store.sqlite import SQLiteStore
    from ticklock.clock import SystemClock
    from ticklock.runtimes.wiring import build_dispatcher

    store = SQLiteStore(":memory:")
    settings = Settings.load({"TICKLOCK_MAX_PENDING": "7"}, plugins=())
    assert Settings.load({}, plugins=()).max_pending == 10_000
    dispatcher = build_dispatcher(
        settings,
        store=store,
        queue=None,  # type: ignore[arg-type] # never used: nothing is claimed
        clock=SystemClock(),
        metrics=PrometheusMetrics(),
        owner="t",
    )
    assert dispatcher.max_pending == 7
    store.close()
