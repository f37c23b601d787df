"""The product as a plug-in: found through its entry point, its settings in their own section (the old
names still read, with a warning), its handlers registered, its store's health check, its README table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ticklock.errors import ConfigError
from ticklock.handlers.contract import Registry
from ticklock.handlers.plugin import discover
from ticklock.runtimes.plugins import Plugins, register_all
from ticklock.settings import Settings, markdown_table
from ticklock_parts.plugin import PartsConfig, plugin

README = Path(__file__).resolve().parents[4] / "README.md"


def test_it_is_found_through_its_entry_point() -> None:
    [found] = [p for p in discover() if p.name == "parts"]
    assert found.register is plugin.register and found.config is PartsConfig
    assert "ticklock_parts.plugin:plugin" in found.origin


def test_its_handlers_are_registered_beside_the_builtin_ones() -> None:
    assert set(register_all(Registry()).names()) == {"noop", "http.check", "alerts.scan", "catalogue.spot_prices"}


def test_the_product_store_defaults_to_the_job_store() -> None:
    engine = Settings.load(environ={"TICKLOCK_DB": "/tmp/x.db"})
    assert engine.section("parts").store_url(engine) == "sqlite:////tmp/x.db"
    other = Settings.load(environ={"TICKLOCK_PARTS_STORE": "mongodb://db/product"})
    assert other.section("parts").store_url(other) == "mongodb://db/product"


def test_the_old_names_are_read_for_one_release_with_a_warning() -> None:
    old = Settings.load(
        environ={"TICKLOCK_PRODUCT_STORE": "sqlite:///old.db", "TICKLOCK_VENDOR_URL": "https://v.test"},
        overrides={"vendor_batch": "7"},
    )
    parts = old.section("parts")
    assert (parts.store, parts.vendor_url, parts.vendor_batch) == ("sqlite:///old.db", "https://v.test", 7)
    assert old.deprecated == (
        "TICKLOCK_PRODUCT_STORE is deprecated and goes in the next release: use TICKLOCK_PARTS_STORE",
        "TICKLOCK_VENDOR_URL is deprecated and goes in the next release: use TICKLOCK_PARTS_VENDOR_URL",
        "--vendor-batch is deprecated and goes in the next release: use --parts-vendor-batch",
    )
    new = Settings.load(
        environ={"TICKLOCK_VENDOR_URL": "https://old.test", "TICKLOCK_PARTS_VENDOR_URL": "https://n.test"}
    )
    assert new.section("parts").vendor_url == "https://n.test" and new.deprecated == ()
    with pytest.raises(ConfigError, match="TICKLOCK_VENDOR_BATCH: must be between 1 and 1000, got 0"):
        Settings.load(environ={"TICKLOCK_VENDOR_BATCH": "0"})


def test_the_vendor_key_is_a_secret() -> None:
    data = Settings.load(environ={"TICKLOCK_PARTS_VENDOR_KEY": "k-123", "TICKLOCK_PARTS_VENDOR_BATCH": "9"}).as_dict()
    assert data["plugins"]["parts"]["vendor_batch"] == 9
    assert "vendor_key" not in data["plugins"]["parts"] and "k-123" not in json.dumps(data, default=str)


def test_its_health_check_pings_its_store(tmp_path: Path) -> None:
    healthy = Plugins(Settings.load(environ={"TICKLOCK_DB": str(tmp_path / "t.db")}))
    [check] = healthy.health_checks()
    assert check.name == "parts.store" and check.check() is None
    missing = Plugins(Settings.load(environ={"TICKLOCK_PARTS_STORE": f"sqlite:///{tmp_path}/no/such/dir/p.db"}))
    [broken] = missing.health_checks()
    with pytest.raises(Exception, match="cannot open"):
        broken.check()


def test_the_readme_lists_its_settings_in_their_own_section() -> None:
    table = markdown_table(discover())
    assert "#### Plug-in `parts`" in table
    assert table in README.read_text()
