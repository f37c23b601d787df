"""``ticklock ui --api`` and the CLI's ``--sigv4`` against the API function behind an IAM-authorised
gateway: ``tests/support/gateway.py`` checks every signature with a verifier of its own and hands the
signed requests to the real handler (``functions/api/app.py``), logging which reached it. The dashboard
is driven through ``ticklock ui`` in Chromium; the CLI is run as an operator would."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.e2e.browser import Tab
from tests.e2e.conftest import REPO, TICKLOCK, free_port, run_cli

pytestmark = [pytest.mark.e2e]
KEY, SECRET, REGION = "AKIDOPERATOR", "operator/secret/key+EXAMPLE", "eu-west-1"


def aws_env(secret: str = SECRET) -> dict[str, str]:
    """The standard chain's environment credentials, and nothing else it could find."""
    return {
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class Gateway:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/Prod"
        self.log_path = workdir / "gateway.jsonl"
        env = {**os.environ, "PYTHONPATH": str(REPO), "TICKLOCK_DB": str(workdir / "api.db"),
               "TICKLOCK_HANDLER_MODULES": "tests.support.handlers", "TICKLOCK_LOG_LEVEL": "warning"}  # fmt: skip
        with (workdir / "gateway.err").open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.gateway", "--port", str(self.port), "--key", KEY, "--secret",
                 SECRET, "--region", REGION, "--log", str(self.log_path)],
                env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        assert self.proc.stdout is not None
        with self.proc.stdout:  # it prints one line, when it listens
            assert self.proc.stdout.readline().strip() == b"ready", (workdir / "gateway.err").read_text()

    def log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]


class Ui:
    def __init__(self, api: str, workdir: Path, secret: str = SECRET) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(REPO), **aws_env(secret)}
        with (workdir / f"ui-{self.port}.err").open("wb") as err:
            self.proc = subprocess.Popen(
                [*TICKLOCK, "ui", "--api", api, "--sigv4", "--region", REGION, "--port", str(self.port)],
                env=env, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        assert self.proc.stdout is not None
        with self.proc.stdout:  # it prints one line, when it listens
            line = self.proc.stdout.readline().decode()
        assert line.startswith("ticklock ui: "), (workdir / f"ui-{self.port}.err").read_text()
        assert "SigV4-signed" in line


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(kind: str, *args: Any, **kwargs: Any) -> Any:
        made = Gateway(tmp_path) if kind == "gateway" else Ui(args[0], tmp_path, **kwargs)
        started.append(made.proc)
        return made

    yield start
    for proc in started:
        proc.kill()
        proc.wait(10)


def test_the_dashboard_through_ticklock_ui_reaches_the_api_function_signed(
    servers: Callable[..., Any],
    browser: Any,
) -> None:
    gateway = servers("gateway")
    ui = servers("ui", gateway.url)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = Tab(context.new_page(), ui.url)
    page = tab.open("/new")
    page.locator("#f-name").fill("made-through-the-gateway")
    page.locator("#f-handler").select_option("test.record")
    page.locator("[id='f-schedule.expr']").fill("0 0 3 * * *")
    expect(page.locator("#preview-words")).to_have_text("at 03:00:00 every day")
    page.locator("#save").click()
    expect(page.locator("h1")).to_contain_text("made-through-the-gateway")
    page = tab.open("/jobs")
    expect(page.locator("#jobs tbody tr", has_text="made-through-the-gateway")).to_have_count(1)
    tab.open("/")
    expect(page.locator("h1")).to_have_text("Overview")
    context.close()
    assert tab.errors == []

    log = gateway.log()
    assert log and all(r["signed"] for r in log), [r for r in log if not r["signed"]]
    reached = {(r["method"], r["path"].split("?")[0], r["handler_status"]) for r in log}
    assert ("POST", "/Prod/schedules/preview", 200) in reached
    assert ("POST", "/Prod/jobs", 201) in reached
    assert ("GET", "/Prod/overview", 200) in reached
    assert any(m == "GET" and p == "/Prod/jobs" and s == 200 for m, p, s in reached)


def test_an_unsigned_or_badly_signed_request_never_reaches_the_handler(
    servers: Callable[..., Any], tmp_path: Path
) -> None:
    gateway = servers("gateway")
    assert httpx.get(f"{gateway.url}/jobs", timeout=10).status_code == 403
    wrong = servers("ui", gateway.url, secret="not-the-secret")
    answer = httpx.get(f"{wrong.url}/jobs", timeout=10)
    assert answer.status_code == 403 and "does not match" in answer.json()["message"]
    log = gateway.log()
    assert [r["signed"] for r in log] == [False, False] and not any("handler_status" in r for r in log)
    assert log[0]["problem"] == "missing or malformed Authorization"


def test_ticklock_ui_refuses_other_sites_and_other_hosts(servers: Callable[..., Any]) -> None:
    gateway = servers("gateway")
    ui = servers("ui", gateway.url)
    assert httpx.get(f"{ui.url}/ui/", timeout=10).status_code == 200
    assert httpx.get(f"{ui.url}/jobs", headers={"host": "evil.example"}, timeout=10).status_code == 403
    posted = httpx.post(f"{ui.url}/jobs", headers={"origin": "http://evil.example"}, json={}, timeout=10)
    assert posted.status_code == 403
    assert gateway.log() == []  # neither was passed on
    # nor what no browser sends: a target that names another host, a length that is not one, a chunked body
    for raw, status in (
        (b"GET @evil.example/jobs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", b" 400 "),
        (b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: -1\r\n\r\n", b" 413 "),
        (b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b" 411 "),
    ):
        with socket.create_connection(("127.0.0.1", ui.port), timeout=10) as conn:
            conn.sendall(raw % ui.port)
            assert status in conn.recv(200).split(b"\r\n")[0] + b" ", raw
    assert gateway.log() == []


def test_the_cli_signs_with_sigv4(servers: Callable[..., Any], tmp_path: Path) -> None:
    gateway = servers("gateway")
    env = {**aws_env(), "TICKLOCK_API_URL": gateway.url}
    created = run_cli("jobs", "create", "cli-signed", "--handler", "test.record", "--cron", "0 0 4 * * *",
                      "--sigv4", "--region", REGION, env=env)  # fmt: skip
    assert created.returncode == 0, created.stderr
    searched = run_cli("jobs", "ls", "--search", "signed *", "--sigv4", "--region", REGION, env=env)
    assert searched.returncode == 0, searched.stderr  # a space and a '*' in the query, signed as sent
    both = run_cli("jobs", "ls", "--sigv4", "--region", REGION, "--token", "t", env=env)
    assert both.returncode == 2 and "Authorization" in both.stderr
    listed = run_cli("jobs", "ls", "--sigv4", "--region", REGION, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [j["name"] for j in json.loads(listed.stdout) if not j["name"].startswith("system:")] == ["cli-signed"]
    assert {r["handler_status"] for r in gateway.log()} <= {200, 201} and all(r["signed"] for r in gateway.log())
    unsigned = run_cli("jobs", "ls", env={"TICKLOCK_API_URL": gateway.url})
    assert unsigned.returncode == 1 and "403" in unsigned.stderr
    no_region = run_cli("jobs", "ls", "--sigv4", env={**aws_env(), "TICKLOCK_API_URL": gateway.url,
                                                       "AWS_REGION": "", "AWS_DEFAULT_REGION": ""})  # fmt: skip
    assert no_region.returncode == 2 and "region" in no_region.stderr
