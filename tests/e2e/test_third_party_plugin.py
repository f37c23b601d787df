"""The README's example plug-in (``plugins/hello``), installed by pip as a third party's would be - into a
directory of its own, from a copy of its source - and run from `ticklock serve`: its handler, its setting
(variable and flag), its system job, its health check and its section of the configuration table."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, Serve, free_port, run_cli, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The PYTHONPATH of a process that has the example installed (and the repository, for test handlers)."""
    work = tmp_path_factory.mktemp("hello")
    source = work / "src"
    shutil.copytree(REPO / "plugins" / "hello", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = work / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
    done = subprocess.run([*pip, "--target", str(target), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (target / "ticklock_hello-0.1.0.dist-info" / "entry_points.txt").is_file()
    return f"{target}:{REPO}"


def test_the_example_plugin_runs_from_ticklock_serve(installed: str, start: Callable[..., Serve]) -> None:
    serve = start(PYTHONPATH=installed, TICKLOCK_HELLO_GREETING="Bonjour")
    names = {h["name"] for h in serve.client.get("/handlers").json()}
    assert "hello.greet" in names
    [job] = [j for j in serve.client.get("/jobs").json()["items"] if j["name"] == "system:hello.greet"]
    assert job["schedule"] == {"kind": "interval", "seconds": 3600} and job["payload"] == {"name": "operator"}
    assert job["timeout"] == 10
    assert serve.client.post(f"/jobs/{job['id']}/trigger").status_code == 202
    [done] = wait_for(lambda: [e for e in serve.executions(job["id"]) if e["finished_at"]])
    assert done["status"] == "success", done
    assert "Bonjour, operator!" in serve.log()
    health = serve.client.get("/health").json()
    assert health["checks"] == [{"name": "hello.greeting", "status": "ok", "error": None}]
    assert serve.terminate() == 0


def test_the_example_plugins_setting_is_a_flag_and_a_section_of_the_table(installed: str) -> None:
    help_text = run_cli("serve", "--help", env={"PYTHONPATH": installed}).stdout
    assert "--hello-greeting" in help_text and "TICKLOCK_HELLO_GREETING" in help_text
    table = run_cli("config-table", env={"PYTHONPATH": installed}).stdout
    assert "#### Plug-in `hello`: the example plug-in" in table
    row = "| `TICKLOCK_HELLO_GREETING` | `--hello-greeting` | `Hello` | what hello.greet says before the name |"
    assert row in table
    bad = run_cli("serve", "--hello-greeting", " ", env={"PYTHONPATH": installed})
    assert bad.returncode == 2 and "--hello-greeting: must not be empty" in bad.stderr


def test_without_it_the_engine_knows_nothing_of_it(start: Callable[..., Serve]) -> None:
    serve = start()
    assert "hello.greet" not in {h["name"] for h in serve.client.get("/handlers").json()}
    assert not [j for j in serve.client.get("/jobs").json()["items"] if j["name"].startswith("system:hello")]
    assert serve.terminate() == 0


def test_a_system_job_no_plugin_declares_stops_the_start_with_a_message(installed: str, tmp_path: Path) -> None:
    env = {"PYTHONPATH": installed, "TICKLOCK_SYSTEM_JOBS": "nope", "TICKLOCK_DB": str(tmp_path / "t.db")}
    done = run_cli("serve", "--port", str(free_port()), env=env)
    assert done.returncode == 2, done.stderr
    assert "ticklock: error: TICKLOCK_SYSTEM_JOBS: no system job 'nope'; known: " in done.stderr
    assert "hello.greet" in done.stderr and "Traceback" not in done.stderr
