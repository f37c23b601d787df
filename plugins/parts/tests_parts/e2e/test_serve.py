"""`ticklock serve` end to end with the plug-in installed: the system jobs seeded at boot and run, a flag
reaching the plug-in's settings, the old setting names still read (with a warning), /health running the
plug-in's check, and `python -m ticklock` importing no plug-in module until it serves."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import REPO, TICKLOCK, Serve, free_port, wait_for
from tests_parts.integration.test_system_jobs import alerts_fixture
from tests_parts.support.vendor import VendorServer, vendor_server
from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore
from ticklock_parts.adapters.catalogue.sqlite import SQLiteCatalogueStore

pytestmark = pytest.mark.e2e


def test_ticklock_serve_seeds_the_alert_scan_and_runs_it(start: Callable[..., Serve], tmp_path: Path) -> None:
    db = tmp_path / "ticklock.db"
    alerts_fixture(db)  # the embedded store holds the product's data too
    serve = start(db)
    jobs = serve.client.get("/jobs").json()["items"]
    [scan] = [j for j in jobs if j["name"] == "system:alerts.scan"]
    assert scan["handler"] == "alerts.scan" and scan["timeout"] == 600
    assert serve.client.post(f"/jobs/{scan['id']}/trigger").status_code in (200, 202)
    [done] = wait_for(lambda: [e for e in serve.executions(scan["id"]) if e["status"] != "running"])
    assert done["status"] == "success", done
    data = SQLiteAlertStore(db)
    assert sorted(n.id for n in data.notifications()) == ["a1:eol:new", "a1:risk:new"]
    data.close()


def test_ticklock_serve_seeds_the_catalogue_walk_and_runs_it(start: Callable[..., Serve], tmp_path: Path) -> None:
    db = tmp_path / "ticklock.db"
    catalogue = SQLiteCatalogueStore(db)
    catalogue.put_parts([{"_id": f"p{i}", "mpn": f"MPN-{i}"} for i in range(12)])
    catalogue.close()
    with vendor_server() as vendor:
        serve = start(
            db,
            TICKLOCK_PARTS_VENDOR_URL=vendor.url,
            TICKLOCK_PARTS_VENDOR_KEY=vendor.key,
            TICKLOCK_PARTS_VENDOR_BATCH="5",
        )
        jobs = serve.client.get("/jobs").json()["items"]
        [walk] = [j for j in jobs if j["name"] == "system:catalogue.spot_prices"]
        assert serve.client.post(f"/jobs/{walk['id']}/trigger").status_code in (200, 202)
        [done] = wait_for(lambda: [e for e in serve.executions(walk["id"]) if e["status"] != "running"])
        assert done["status"] == "success", done
        assert [len(r) for r in vendor.requests] == [5, 5, 2]
    catalogue = SQLiteCatalogueStore(db)
    assert catalogue.parts(["p3"])["p3"]["price"] == VendorServer.price("MPN-3")
    assert catalogue.load_cursor() is None  # the whole catalogue was walked
    catalogue.close()


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.timeout(120)
def test_db_flag_reaches_the_product_handlers(tmp_path: Path) -> None:
    data, cwd = tmp_path / "data", tmp_path / "cwd"
    data.mkdir()
    cwd.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKLOCK_")}
    env["PYTHONPATH"] = str(REPO)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*TICKLOCK, "serve", "--db", str(data / "mine.db"), "--port", str(port)],
            env=env, cwd=cwd, stdout=out, stderr=out,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _up(url), timeout=30)
        jobs = httpx.get(f"{url}/jobs").json()["items"]
        scan = next(j for j in jobs if j["handler"] == "alerts.scan")
        assert httpx.post(f"{url}/jobs/{scan['id']}/trigger").status_code == 202

        def finished() -> list[Any]:
            rows = httpx.get(f"{url}/jobs/{scan['id']}/executions").json()["items"]
            return [r for r in rows if r["finished_at"]]

        rows = wait_for(finished, timeout=60)
        assert rows[0]["status"] == "success", rows
        assert list(cwd.iterdir()) == [], "the product handlers wrote into the working directory"
        tables = {r[0] for r in sqlite3.connect(data / "mine.db").execute("SELECT name FROM sqlite_master")}
        assert {"alerts", "notifications", "jobs"} <= tables
    finally:
        proc.kill()
        proc.wait(10)


def test_the_old_setting_names_still_work_with_a_warning_at_start_up(
    start: Callable[..., Serve], tmp_path: Path
) -> None:
    db = tmp_path / "ticklock.db"
    serve = start(db, TICKLOCK_VENDOR_URL="https://vendor.example/api", TICKLOCK_ALERTS_EVERY="600")
    jobs = {j["name"]: j for j in serve.client.get("/jobs").json()["items"]}
    assert jobs["system:alerts.scan"]["schedule"] == {"kind": "interval", "seconds": 600}
    assert "system:catalogue.spot_prices" in jobs  # the walk is configured by the old vendor name
    log = serve.log()
    assert "TICKLOCK_VENDOR_URL is deprecated and goes in the next release: use TICKLOCK_PARTS_VENDOR_URL" in log
    assert "TICKLOCK_ALERTS_EVERY is deprecated" in log
    assert serve.terminate() == 0


def test_health_runs_the_plug_ins_check(start: Callable[..., Serve], tmp_path: Path) -> None:
    serve = start(tmp_path / "ticklock.db")
    health = serve.client.get("/health").json()
    assert health["status"] == "ok"
    assert health["checks"] == [{"name": "parts.store", "status": "ok", "error": None}]
    assert serve.terminate() == 0
    # the product's data on a store that does not answer: the scheduler runs (200), degraded
    broken = start(tmp_path / "other.db", TICKLOCK_PARTS_STORE="mongodb://127.0.0.1:9/x?serverSelectionTimeoutMS=200")
    details = broken.client.get("/health").json()
    assert details["status"] == "degraded" and details["store"] == "ok"
    [check] = details["checks"]
    assert check["name"] == "parts.store" and check["status"] == "failing" and check["error"]
    assert broken.client.get("/health").status_code == 200
    assert broken.terminate() == 0


def _plugin_modules_imported(code: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKLOCK_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [listed] = [line for line in done.stdout.splitlines() if line.startswith("modules:")]
    return listed.removeprefix("modules:").split()


def test_the_engine_imports_no_plug_in_module() -> None:
    # every module of the package, and `python -m ticklock` with a command that serves nothing
    every = """
import pkgutil, runpy, sys, ticklock
for info in pkgutil.walk_packages(ticklock.__path__, "ticklock."):
    if info.name != "ticklock.__main__":  # run below, as `python -m ticklock`
        __import__(info.name)
for argv in (["ticklock", "cron", "0 0 * * * *", "--count", "1"], ["ticklock"]):
    sys.argv = argv
    try:
        runpy.run_module("ticklock", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
print("modules:" + " ".join(m for m in sys.modules if m.split(".")[0] == "ticklock_parts"))
"""
    assert _plugin_modules_imported(every) == []
    # while the plug-in is installed and found when ticklock serves (the contrast that shows the check works)
    found = (
        "from ticklock.handlers.plugin import discover; discover(); import sys; "
        "print('modules:' + ' '.join(sys.modules))"
    )
    assert "ticklock_parts.plugin" in _plugin_modules_imported(found)
