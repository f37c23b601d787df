"""The handler registry and plug-in discovery: entry points, modules, duplicates fail fast."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ticklock.errors import ConfigError, DuplicateHandler
from ticklock.handlers import builtin
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.handlers.plugin import LEGACY_GROUP
from ticklock.runtimes.plugins import register_all


def first(ctx: HandlerContext) -> None:
    """The first one."""


def second(ctx: HandlerContext) -> None:
    """The second one."""


async def coro(ctx: HandlerContext) -> None:
    """An async one.

    More text that is not the description.
    """


@pytest.fixture
def clean_modules() -> Iterator[None]:
    """Forget modules the test imports from its tmp dir, so names can be reused safely."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]
    importlib.invalidate_caches()


def write_module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


def write_distribution(folder: Path, dist: str, entry_points: dict[str, str], module: str, body: str) -> None:
    """A minimal installed distribution: <dist>.dist-info with METADATA and entry_points.txt, plus a module."""
    info = folder / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = [f"[{LEGACY_GROUP}]", *(f"{name} = {target}" for name, target in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    write_module(folder, module, body)


# -- Registry ---------------------------------------------------------------------------------------------


def test_register_and_get() -> None:
    registry = Registry()
    registry.register("b.first", first)
    registry.register("a.coro", coro)
    h = registry.get("b.first")
    assert h is not None
    assert h.name == "b.first"
    assert h.func is first
    assert h.description == "The first one."
    assert h.origin.endswith("first")
    assert not h.is_async
    c = registry.get("a.coro")
    assert c is not None
    assert c.is_async
    assert c.description == "An async one."
    assert registry.get("missing") is None
    assert "b.first" in registry
    assert "missing" not in registry
    assert registry.names() == ["a.coro", "b.first"]
    assert [x.name for x in registry] == ["a.coro", "b.first"]
    assert len(registry) == 2


def test_explicit_description_wins() -> None:
    registry = Registry()
    registry.register("x", first, description="custom")
    h = registry.get("x")
    assert h is not None
    assert h.description == "custom"


def test_decorator_form_registers_and_returns_the_function() -> None:
    registry = Registry()

    @registry.handler("deco")
    def deco(ctx: HandlerContext) -> None:
        """Decorated."""

    h = registry.get("deco")
    assert h is not None
    assert h.func is deco


def test_duplicate_name_names_both_origins() -> None:
    registry = Registry()
    registry.register("same", first)
    with pytest.raises(DuplicateHandler) as info:
        registry.register("same", second)
    message = str(info.value)
    assert info.value.name == "same"
    assert "'same'" in message
    assert f"{__name__}.first" in message
    assert f"{__name__}.second" in message
    # the original registration is kept
    h = registry.get("same")
    assert h is not None
    assert h.func is first


@pytest.mark.parametrize("name", ["", None, 5])
def test_bad_handler_name_is_a_config_error(name: object) -> None:
    with pytest.raises(ConfigError):
        Registry().register(name, first)  # type: ignore[arg-type]


# -- register_all -----------------------------------------------------------------------------------------


def test_register_all_loads_the_builtin_entry_point() -> None:
    registry = register_all(Registry())
    assert "noop" in registry
    assert "http.check" in registry
    noop = registry.get("noop")
    check = registry.get("http.check")
    assert noop is not None
    assert check is not None
    assert noop.func is builtin.noop
    assert not noop.is_async
    assert check.is_async


def test_register_all_returns_the_same_registry() -> None:
    registry = Registry()
    assert register_all(registry) is registry


def test_register_all_twice_on_one_registry_is_a_duplicate() -> None:
    registry = register_all(Registry())
    with pytest.raises(DuplicateHandler):
        register_all(registry)


def test_register_all_loads_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None) -> None:
    write_module(
        tmp_path,
        "tl_unit_handlers_ok",
        """
        def greet(ctx):
            '''Says hello.'''

        async def fetch(ctx):
            '''Fetches.'''

        def register(registry):
            registry.register("greet", greet)
            registry.register("fetch", fetch)
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = register_all(Registry(), modules=("tl_unit_handlers_ok",))
    assert {"noop", "http.check", "greet", "fetch"} <= set(registry.names())
    greet = registry.get("greet")
    fetch = registry.get("fetch")
    assert greet is not None
    assert fetch is not None
    assert greet.description == "Says hello."
    assert greet.origin == "tl_unit_handlers_ok.greet"
    assert fetch.is_async


def test_module_registering_a_builtin_name_again_is_a_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_module(
        tmp_path,
        "tl_unit_handlers_dup",
        """
        def noop(ctx):
            pass

        def register(registry):
            registry.register("noop", noop)
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DuplicateHandler) as info:
        register_all(Registry(), modules=("tl_unit_handlers_dup",))
    assert "ticklock.handlers.builtin.noop" in str(info.value)
    assert "tl_unit_handlers_dup.noop" in str(info.value)


def test_module_without_register_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_module(tmp_path, "tl_unit_handlers_noreg", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as info:
        register_all(Registry(), modules=("tl_unit_handlers_noreg",))
    assert "TICKLOCK_HANDLER_MODULES" in str(info.value)
    assert "tl_unit_handlers_noreg" in str(info.value)


def test_module_whose_register_is_not_callable_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_module(tmp_path, "tl_unit_handlers_notcallable", "register = 'nope'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as info:
        register_all(Registry(), modules=("tl_unit_handlers_notcallable",))
    assert "TICKLOCK_HANDLER_MODULES" in str(info.value)


def test_unimportable_module_is_a_config_error(clean_modules: None) -> None:
    with pytest.raises(ConfigError) as info:
        register_all(Registry(), modules=("tl_unit_no_such_module_anywhere",))
    assert "TICKLOCK_HANDLER_MODULES" in str(info.value)
    assert "tl_unit_no_such_module_anywhere" in str(info.value)


def test_module_failing_on_import_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_module(tmp_path, "tl_unit_handlers_broken", "import tl_unit_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as info:
        register_all(Registry(), modules=("tl_unit_handlers_broken",))
    assert "TICKLOCK_HANDLER_MODULES" in str(info.value)
    assert "tl_unit_handlers_broken" in str(info.value)


def test_third_party_entry_point_is_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_distribution(
        tmp_path,
        "tl_unit_plugin",
        {"tl_unit_plugin": "tl_unit_plugin_mod:register"},
        "tl_unit_plugin_mod",
        """
        def ping(ctx):
            '''Pings.'''

        def register(registry):
            registry.register("plugin.ping", ping)
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    registry = register_all(Registry())
    assert {"noop", "http.check", "plugin.ping"} <= set(registry.names())
    ping = registry.get("plugin.ping")
    assert ping is not None
    assert ping.origin == "tl_unit_plugin_mod.ping"


def test_third_party_entry_point_registering_noop_again_is_a_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_distribution(
        tmp_path,
        "tl_unit_dupplugin",
        {"tl_unit_dupplugin": "tl_unit_dupplugin_mod:register"},
        "tl_unit_dupplugin_mod",
        """
        def noop(ctx):
            pass

        def register(registry):
            registry.register("noop", noop)
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(DuplicateHandler) as info:
        register_all(Registry())
    message = str(info.value)
    assert info.value.name == "noop"
    assert "ticklock.handlers.builtin.noop" in message
    assert "tl_unit_dupplugin_mod.noop" in message


def test_third_party_entry_point_that_fails_to_load_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    write_distribution(
        tmp_path,
        "tl_unit_badplugin",
        {"tl_unit_badplugin": "tl_unit_badplugin_mod:no_such_function"},
        "tl_unit_badplugin_mod",
        "X = 1\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(ConfigError) as info:
        register_all(Registry())
    assert "tl_unit_badplugin" in str(info.value)


def test_entry_points_are_not_seen_once_the_distribution_is_gone() -> None:
    # the fake distributions above live in tmp dirs removed from sys.path afterwards
    registry = register_all(Registry())
    assert not any(name.startswith("plugin.") for name in registry.names())
