"""A real browser for the dashboard's tests: Debian's headless Chromium driven by Playwright, and a tab
whose console is watched (``Tab.errors``). tests/e2e/conftest.py offers the fixtures to every module."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Request, Response, expect, sync_playwright

if TYPE_CHECKING:
    from tests.e2e.conftest import Serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CLIENT_ERROR = "Failed to load resource: the server responded with a status of 4"
expect.set_options(timeout=15_000)  # a shared, busy machine: waits are generous, never timed assertions


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Chromium is a test server: scripts/services.sh installs Debian's chromium"
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    yield browser
    browser.close()


class Tab:
    """A page with its console watched: ``errors`` collects every error the browser reports."""

    def __init__(self, page: Page, base: str) -> None:
        self.page, self.base = page, base
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"script error: {exc}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)
        page.set_default_timeout(10_000)

    def _failed(self, request: Request) -> None:
        # a request cut off by the page's own navigation (a reload, a new address) is not a failure
        if request.failure != "net::ERR_ABORTED":
            self.errors.append(f"request failed: {request.url} {request.failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 500:
            self.errors.append(f"{response.status} from {response.url}")

    def _console(self, message: ConsoleMessage) -> None:
        # the browser logs every 4xx it gets; a refusal (a bad field, a wrong token) is an answer the page
        # shows, not an error of the page. 5xx answers are caught as responses.
        if message.type == "error" and not message.text.startswith(CLIENT_ERROR):
            self.errors.append(message.text)

    def open(self, route: str) -> Page:
        self.page.goto(f"{self.base}/ui/#{route}")
        return self.page


@pytest.fixture
def tab(browser: Browser) -> Iterator[Callable[..., Tab]]:
    contexts = []

    def open_tab(serve: Serve, **options: Any) -> Tab:
        context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **options})
        contexts.append(context)
        return Tab(context.new_page(), serve.url)

    yield open_tab
    for context in contexts:
        context.close()
