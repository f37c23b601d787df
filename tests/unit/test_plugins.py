"""The plug-in contract (``ticklock.handlers.plugin``) from the engine's side, with plug-ins written here: their
settings in a section of their own (flags, defaults, bad values, secrets, older names with a warning),
discovery and its errors, registration, system jobs seeded, and health checks in ``/health``."""

from __future__ import annotations

import json
import logging
import re
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.api.app import Api
from ticklock.api.http import Request
from ticklock.api.routes import ApiDeps
from ticklock.cli import main
from ticklock.clock import SystemClock
from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService
from ticklock.errors import ConfigError
from ticklock.handlers import builtin
from ticklock.handlers.contract import FireLogger
from ticklock.handlers.plugin import (
    Context,
    HandlerContext,
    HealthCheck,
    Plugin,
    Registry,
    Setting,
    SystemJob,
    discover,
    http_url,
    integer,
    optional_text,
)
from ticklock.runtimes.plugins import Plugins
from ticklock.settings import Settings, markdown_table


@dataclass(frozen=True)
class ShopConfig:
    url: str
    batch: int
    key: str | None


def _register(registry: Registry, context: Context[ShopConfig]) -> None:
    def sync(ctx: HandlerContext) -> None:
        """Syncs the shop."""

    registry.register("shop.sync", sync)


def _jobs(context: Context[ShopConfig]) -> list[SystemJob]:
    return [
        SystemJob("shop.sync", every=120, timeout=600.0, max_retries=1, payload={"full": True}),
        SystemJob("shop.report", every=86400, needs=None if context.config.url else "TICKLOCK_SHOP_URL"),
    ]


SHOP = Plugin(
    name="shop",
    register=_register,
    settings=(
        Setting("url", "", http_url, "the shop's API"),
        Setting("batch", "10", integer(1, 100), "items per call"),
        Setting("key", "", optional_text, "the shop's key", secret=True),
    ),
    config=ShopConfig,
    system_jobs=_jobs,
    description="a test plug-in",
)


def load(environ: dict[str, str] | None = None, **overrides: str) -> Settings:
    return Settings.load(environ=environ or {}, overrides=overrides, plugins=(builtin.plugin, SHOP))


# -- settings ---------------------------------------------------------------------------------------------


def test_a_plug_ins_settings_are_read_into_its_typed_section() -> None:
    assert load().section("shop") == ShopConfig(url="", batch=10, key=None)
    s = load({"TICKLOCK_SHOP_URL": "https://shop.test", "TICKLOCK_SHOP_BATCH": "20", "TICKLOCK_SHOP_KEY": " k "})
    assert s.section("shop") == ShopConfig(url="https://shop.test", batch=20, key="k")
    assert s.deprecated == ()
    # a flag wins over the variable, keyed section.name
    flagged = load({"TICKLOCK_SHOP_BATCH": "20"}, **{"shop.batch": "30"})
    assert flagged.section("shop").batch == 30


def test_a_bad_value_names_the_plug_ins_variable_or_flag() -> None:
    with pytest.raises(ConfigError, match=re.escape("TICKLOCK_SHOP_BATCH: must be between 1 and 100, got 0")):
        load({"TICKLOCK_SHOP_BATCH": "0"})
    with pytest.raises(ConfigError, match=re.escape("--shop-url: must be an http(s) URL, got 'ftp://x'")):
        load({}, **{"shop.url": "ftp://x"})


def test_an_older_variable_or_flag_still_works_for_one_release_with_a_warning() -> None:
    moved = Plugin(
        name="store2",
        register=_register,
        settings=(Setting("url", "", http_url, "moved here", aliases=("legacy_url",)),),
        config=lambda url: url,
    )
    via_env = Settings.load(environ={"TICKLOCK_LEGACY_URL": "https://old.test"}, plugins=(moved,))
    assert via_env.section("store2") == "https://old.test"
    assert via_env.deprecated == (
        "TICKLOCK_LEGACY_URL is deprecated and goes in the next release: use TICKLOCK_STORE2_URL",
    )
    via_flag = Settings.load(environ={}, overrides={"legacy_url": "https://flag.test"}, plugins=(moved,))
    assert via_flag.section("store2") == "https://flag.test"
    assert via_flag.deprecated == ("--legacy-url is deprecated and goes in the next release: use --store2-url",)
    both = Settings.load(
        environ={"TICKLOCK_LEGACY_URL": "https://old.test", "TICKLOCK_STORE2_URL": "https://new.test"},
        plugins=(moved,),
    )
    assert both.section("store2") == "https://new.test" and both.deprecated == ()
    table = markdown_table([moved])
    assert "| `TICKLOCK_STORE2_URL` | `--store2-url` | `` | moved here (formerly `TICKLOCK_LEGACY_URL`) |" in table
    bad = Settings.load  # a bad value under the old name names the old name
    with pytest.raises(ConfigError, match=re.escape("TICKLOCK_LEGACY_URL: must be an http(s) URL")):
        bad(environ={"TICKLOCK_LEGACY_URL": "nope"}, plugins=(moved,))


def test_secret_settings_stay_out_of_as_dict() -> None:
    data = load({"TICKLOCK_SHOP_KEY": "hush-hush", "TICKLOCK_SHOP_URL": "https://shop.test"}).as_dict()
    assert data["plugins"] == {"shop": {"url": "https://shop.test", "batch": 10}}
    assert "hush-hush" not in json.dumps(data, default=str)


def test_the_configuration_table_has_a_section_per_plug_in() -> None:
    table = markdown_table([builtin.plugin, SHOP])
    assert table.startswith(markdown_table())  # the engine's first
    section = table.split("#### Plug-in `shop`: a test plug-in", 1)[1]
    assert "| `TICKLOCK_SHOP_URL` | `--shop-url` | `` | the shop's API |" in section
    assert "| `TICKLOCK_SHOP_KEY` | `--shop-key` | `` | the shop's key (secret: kept out of logs) |" in section
    assert "builtin" not in table  # no settings, no section


def test_two_settings_on_one_variable_are_refused() -> None:
    clash = Plugin(name="api", register=_register, settings=(Setting("token", "", optional_text, "clash"),))
    with pytest.raises(
        ConfigError, match=re.escape("two settings are read from TICKLOCK_API_TOKEN: api_token and api.token")
    ):
        Settings.load(environ={}, plugins=(clash,))


# -- discovery --------------------------------------------------------------------------------------------


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    import importlib
    import sys

    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]
    importlib.invalidate_caches()


def write(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


PLUGIN_MODULE = """
    from dataclasses import dataclass
    from ticklock.handlers.plugin import Plugin, Setting, text

    @dataclass(frozen=True)
    class Config:
        word: str

    def register(registry, context):
        def say(ctx):
            '''Says the word.'''
        registry.register("say." + context.config.word, say)

    plugin = Plugin(name="say", register=register, settings=(Setting("word", "hi", text, "the word"),), config=Config)
"""


def test_a_module_may_name_a_plugin_object_with_settings(modules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(modules, "tl_say_plugin", PLUGIN_MODULE)
    [found] = [p for p in discover(("tl_say_plugin",)) if p.name == "say"]
    settings = Settings.load(environ={"TICKLOCK_SAY_WORD": "hello"}, plugins=(found,))
    assert Plugins(settings).registry().names() == ["say.hello"]
    # the command line finds it through TICKLOCK_HANDLER_MODULES, for its flags and the table
    monkey = pytest.MonkeyPatch()
    monkey.setenv("TICKLOCK_HANDLER_MODULES", "tl_say_plugin")
    try:
        assert main(["config-table"]) == 0
        assert "| `TICKLOCK_SAY_WORD` | `--say-word` | `hi` | the word |" in capsys.readouterr().out
    finally:
        monkey.undo()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("plugin = 42\n", "is not a ticklock.plugin.Plugin (got int)"),
        (
            "from ticklock.handlers.plugin import Plugin\n"
            "plugin = Plugin(name='Bad-Name', register=lambda r, c: None)\n",
            "a plug-in's name is lower case letters, digits and _, got 'Bad-Name'",
        ),
        (
            PLUGIN_MODULE.replace("word: str", "word: str\n        extra: int"),
            "its config's fields ['extra', 'word'] are not its settings ['word']",
        ),
        (
            "from ticklock.handlers.plugin import Plugin, Setting, text\n"
            "s = Setting('a', '', text, 'twice')\n"
            "plugin = Plugin(name='twice', register=lambda r, c: None, settings=(s, s))\n",
            "plug-in 'twice' declares the setting 'a' twice",
        ),
    ],
)
def test_a_plugin_that_breaks_the_contract_stops_start_up(modules: Path, body: str, message: str) -> None:
    write(modules, "tl_bad_plugin", textwrap.dedent(body))
    with pytest.raises(ConfigError, match=re.escape(message)):
        discover(("tl_bad_plugin",))


def test_two_plugins_of_one_name_stop_start_up(modules: Path) -> None:
    write(modules, "tl_say_a", PLUGIN_MODULE)
    write(modules, "tl_say_b", PLUGIN_MODULE)
    with pytest.raises(ConfigError, match="two plug-ins are named 'say'"):
        discover(("tl_say_a", "tl_say_b"))


def test_a_register_that_fails_names_its_plugin() -> None:
    def broken(registry: Registry, context: Context[None]) -> None:
        raise KeyError("missing")

    settings = Settings.load(environ={}, plugins=(Plugin(name="broken", register=broken, origin="here"),))
    with pytest.raises(ConfigError, match=re.escape("plug-in 'broken' (here) failed in its register: 'missing'")):
        Plugins(settings).registry()


def test_the_plugin_gets_the_engines_email_sender_built_once() -> None:
    seen: list[Any] = []

    def keep(registry: Registry, context: Context[None]) -> None:
        seen.extend([context.email(), context.email(), context.engine.store_url])

    settings = Settings.load(environ={"TICKLOCK_EMAIL": "smtp://127.0.0.1:2525"}, plugins=(Plugin("m", keep),))
    Plugins(settings).registry()
    first, again, store = seen
    assert type(first).__name__ == "SMTPSender" and first is again and store == "sqlite:///ticklock.db"
    off = Settings.load(environ={}, plugins=(Plugin("m", keep),))
    seen.clear()
    Plugins(off).registry()
    assert seen[0] is None


# -- system jobs ------------------------------------------------------------------------------------------


@pytest.fixture
def service(tmp_path: Path) -> Iterator[JobService]:
    store = SQLiteStore(tmp_path / "jobs.db")
    registry = Plugins(load()).registry()
    registry.register("shop.report", lambda ctx: None)
    yield JobService(store, registry, SystemClock())
    store.close()


def test_declared_system_jobs_are_seeded_once_with_their_defaults(service: JobService) -> None:
    Plugins(load({"TICKLOCK_RUNNER_TIMEOUT": "300"})).seed(service)
    [job] = service.store.list_jobs()  # the report needs a URL
    assert (job.name, job.handler, job.schedule, job.payload) == (
        "system:shop.sync",
        "shop.sync",
        IntervalSchedule(120),
        {"full": True},
    )
    assert job.timeout == 270.0 and job.max_retries == 1  # capped at what a 300 s runner allows
    Plugins(load({"TICKLOCK_SHOP_URL": "https://shop.test"})).seed(service)
    assert sorted(j.name for j in service.store.list_jobs()) == ["system:shop.report", "system:shop.sync"]


def test_system_jobs_chooses_among_the_declared_ones(service: JobService) -> None:
    Plugins(load({"TICKLOCK_SYSTEM_JOBS": ""})).seed(service)
    assert service.store.list_jobs() == []
    Plugins(load({"TICKLOCK_SYSTEM_JOBS": "shop.sync"})).seed(service)
    assert [j.name for j in service.store.list_jobs()] == ["system:shop.sync"]
    with pytest.raises(ConfigError, match=re.escape("no system job 'nope'; known: shop.report, shop.sync")):
        Plugins(load({"TICKLOCK_SYSTEM_JOBS": "nope"})).seed(service)
    with pytest.raises(ConfigError, match=re.escape("no system job 'x'; known: none")):
        Plugins(Settings.load(environ={"TICKLOCK_SYSTEM_JOBS": "x"}, plugins=())).seed(service)


# -- health -----------------------------------------------------------------------------------------------


def health(checks: list[HealthCheck], tmp_path: Path, token: str | None = None, **headers: str) -> Any:
    store = SQLiteStore(tmp_path / "health.db")
    api = Api(ApiDeps(JobService(store, Registry(), SystemClock()), None, checks), api_token=token, max_body_bytes=64)
    try:
        reply = api.handle(Request("GET", "/health", headers=headers))
        return reply.status, json.loads(reply.body)
    finally:
        api.close()
        store.close()


def test_health_runs_the_plugins_checks(tmp_path: Path) -> None:
    def raising() -> str | None:
        raise OSError("disk gone")

    ok = HealthCheck("shop.api", lambda: None)
    status, body = health([ok], tmp_path)
    assert status == 200 and body["status"] == "ok"
    assert body["checks"] == [{"name": "shop.api", "status": "ok", "error": None}]
    failing = [ok, HealthCheck("shop.queue", lambda: "42 items stuck"), HealthCheck("shop.disk", raising)]
    status, body = health(failing, tmp_path)
    assert status == 200 and body["status"] == "degraded" and body["store"] == "ok"
    assert body["checks"][1:] == [
        {"name": "shop.queue", "status": "failing", "error": "42 items stuck"},
        {"name": "shop.disk", "status": "failing", "error": "OSError: disk gone"},
    ]
    # without the token: up or not, nothing of the plug-ins
    status, body = health(failing, tmp_path, token="t")
    assert (status, body) == (200, {"status": "ok"})


def test_a_hung_check_is_bounded_like_the_stores_ping(tmp_path: Path) -> None:
    release = threading.Event()

    def hang() -> str | None:
        release.wait(30)
        return None

    try:
        status, body = health([HealthCheck("shop.slow", hang)], tmp_path)
    finally:
        release.set()
    assert status == 200 and body["status"] == "degraded"
    assert body["checks"] == [
        {"name": "shop.slow", "status": "failing", "error": "shop.slow did not answer within 1 s"}
    ]


def test_a_handlers_log_fields_are_kept_beside_the_fires(caplog: pytest.LogCaptureFixture) -> None:
    logger = FireLogger(logging.getLogger("ticklock.handler.t"), {"job_id": "j1", "execution_id": "e1"})
    with caplog.at_level(logging.INFO, logger="ticklock.handler.t"):
        logger.info("greeted", extra={"said": "hi", "job_id": "not the fire's"})
    [record] = caplog.records
    assert (record.said, record.job_id, record.execution_id) == ("hi", "j1", "e1")  # type: ignore[attr-defined]


# -- a plug-in's bugs stop the start with its name on them ------------------------------------------------


def _bound(**parts: Any) -> Plugins:
    plugin = Plugin(name="buggy", register=lambda r, c: None, origin="tests", **parts)
    return Plugins(Settings.load(environ={}, plugins=(plugin,)))


def _raise(context: Context[None]) -> list[Any]:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("parts", "call", "message"),
    [
        ({"health": _raise}, "health_checks", "plug-in 'buggy' (tests) failed in its health: boom"),
        ({"health": lambda c: ["not a check"]}, "health_checks", "'not a check' is not a ticklock.plugin.HealthCheck"),
        (
            {"health": lambda c: [HealthCheck("x", lambda: None), HealthCheck("x", lambda: None)]},
            "health_checks",
            "plug-in 'buggy' declares the health check 'x' twice",
        ),
        ({"system_jobs": _raise}, "declared", "plug-in 'buggy' (tests) failed in its system_jobs: boom"),
        ({"system_jobs": lambda c: [("a", 1)]}, "declared", "('a', 1) is not a ticklock.plugin.SystemJob"),
        (
            {"system_jobs": lambda c: [SystemJob("a", every=0.5)]},
            "declared",
            "system job 'a' runs every whole number of seconds (at least 1), got 0.5",
        ),
        (
            {"system_jobs": lambda c: [SystemJob("a", every=1), SystemJob("a", every=2)]},
            "declared",
            "the system job 'a' is declared twice: by 'buggy' and by 'buggy'",
        ),
    ],
)
def test_a_plugins_callback_that_fails_is_a_config_error(parts: dict[str, Any], call: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        getattr(_bound(**parts), call)()


def test_a_config_that_refuses_its_settings_is_a_config_error() -> None:
    def config(**values: Any) -> Any:
        raise ValueError("no thanks")

    picky = Plugin(name="picky", register=_register, settings=(Setting("a", "1", integer(0, 9), "a"),), config=config)
    with pytest.raises(ConfigError, match=re.escape("plug-in 'picky': its config refused its settings: no thanks")):
        Settings.load(environ={}, plugins=(picky,))


def test_a_parser_that_raises_something_else_still_names_the_variable() -> None:
    def parse(raw: str) -> str:
        raise KeyError(raw)

    odd = Plugin(name="odd", register=_register, settings=(Setting("a", "x", parse, "a"),), config=lambda a: a)
    with pytest.raises(ConfigError, match="TICKLOCK_ODD_A: 'x'"):
        Settings.load(environ={}, plugins=(odd,))


def test_a_system_job_whose_handler_nobody_registered_is_a_config_error(service: JobService) -> None:
    ghost: Plugin[None] = Plugin(
        name="ghost", register=lambda r, c: None, system_jobs=lambda c: [SystemJob("ghost.run", every=60)]
    )
    with pytest.raises(ConfigError, match=r"the system job 'system:ghost\.run' cannot be created: .*ghost\.run"):
        Plugins(Settings.load(environ={}, plugins=(ghost,))).seed(service)


def test_all_is_read_in_any_case(service: JobService) -> None:
    Plugins(load({"TICKLOCK_SYSTEM_JOBS": "ALL"})).seed(service)
    assert [j.name for j in service.store.list_jobs()] == ["system:shop.sync"]


def test_an_older_flag_wins_over_the_new_variable() -> None:
    moved = Plugin(
        name="m2",
        register=_register,
        settings=(Setting("url", "", http_url, "u", aliases=("old_url",)),),
        config=lambda url: url,
    )
    s = Settings.load(
        environ={"TICKLOCK_M2_URL": "https://env.test"}, overrides={"old_url": "https://flag.test"}, plugins=(moved,)
    )
    assert s.section("m2") == "https://flag.test"


def test_the_older_group_may_name_a_plugin_object_or_a_module(modules: Path) -> None:
    write(modules, "tl_say_legacy", PLUGIN_MODULE + "\n    X = 1\n")
    info = modules / "tl_legacy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tl_legacy\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ticklock.handlers]\nsay = tl_say_legacy:plugin\nbad = tl_say_legacy:X\n")
    import importlib

    importlib.invalidate_caches()
    with pytest.raises(
        ConfigError,
        match=re.escape("handler plug-in 'bad' (tl_say_legacy:X): its register(registry) is not a function (got int)"),
    ):
        discover()
    (info / "entry_points.txt").write_text("[ticklock.handlers]\nsay = tl_say_legacy:plugin\n")
    [say] = [p for p in discover() if p.name == "say"]
    assert say.config is not None and say.settings[0].name == "word"
    (info / "entry_points.txt").write_text("[ticklock.handlers]\nwhole = tl_say_legacy\n")
    [whole] = [p for p in discover() if p.name == "say"]  # a module with a plugin object: that plug-in
    assert whole.origin.startswith("handler plug-in 'whole'")


OLDER_PATHS_MODULE = """
    from ticklock.handlers.registry import HandlerContext, Registry
    from ticklock.plugin import Context, Plugin, Setting, text

    def register(registry: Registry, context: Context[str]) -> None:
        def say(ctx: HandlerContext) -> None:
            '''Says the word.'''
        registry.register("old." + context.config, say)

    plugin = Plugin(name="old", register=register, settings=(Setting("word", "hi", text, "the word"),),
                    config=lambda word: word)
"""


def test_a_plugin_written_against_the_older_import_paths_still_loads(modules: Path) -> None:
    """``ticklock.plugin`` and ``ticklock.handlers.registry`` were the contract's paths before it had one
    home in ``ticklock.handlers``: plug-ins installed in the wild import them."""
    write(modules, "tl_old_paths", OLDER_PATHS_MODULE)
    [found] = [p for p in discover(("tl_old_paths",)) if p.name == "old"]
    settings = Settings.load(environ={"TICKLOCK_OLD_WORD": "hello"}, plugins=(found,))
    assert Plugins(settings).registry().names() == ["old.hello"]


def test_health_asks_every_check_at_once(tmp_path: Path) -> None:
    release = threading.Event()
    started: list[str] = []

    def slow(name: str) -> HealthCheck:
        def check() -> str | None:
            started.append(name)
            release.wait(30)
            return None

        return HealthCheck(name, check)

    try:
        _, body = health([slow("a.one"), slow("a.two")], tmp_path)
    finally:
        release.set()
    assert sorted(started) == ["a.one", "a.two"]  # the second was asked before the first gave up
    assert [c["error"] for c in body["checks"]] == [
        "a.one did not answer within 1 s",
        "a.two did not answer within 1 s",
    ]
