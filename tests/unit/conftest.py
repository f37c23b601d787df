"""Shared fixtures for the unit tests: handler contexts, an invoker, and an in-process API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ticklock.adapters.metrics.prometheus import PrometheusMetrics
from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.api.asgi import local_app
from ticklock.api.routes import ApiDeps
from ticklock.clock import FakeClock
from ticklock.domain.job_rules import Limits
from ticklock.domain.service import JobService
from ticklock.engine.invoke import Invoker
from ticklock.handlers import builtin
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.runtimes.plugins import register_all

API_START = datetime(2026, 1, 1, tzinfo=UTC)
TOKEN = "s3cret-token"


def make_ctx(*, seconds: float = 5.0, payload: dict[str, Any] | None = None) -> HandlerContext:
    """A HandlerContext whose deadline is ``seconds`` from now on the wall clock."""
    now = datetime.now(UTC)
    return HandlerContext(
        job_id="job-1",
        job_name="unit",
        payload=payload or {},
        scheduled_at=now,
        execution_id="exec-1",
        attempt=1,
        deadline=now + timedelta(seconds=seconds),
        logger=logging.LoggerAdapter(logging.getLogger("ticklock.tests"), {}),
        now=lambda: datetime.now(UTC),
    )


@pytest.fixture
def ctx_factory() -> Callable[..., HandlerContext]:
    return make_ctx


@pytest.fixture
def invoker() -> Iterator[Invoker]:
    inv = Invoker()
    yield inv
    inv.close()


@dataclass
class ApiHarness:
    """An ASGI app on a real SQLite store, driven by httpx in a fresh event loop per request."""

    app: Any
    store: SQLiteStore
    clock: FakeClock
    registry: Registry
    token: str | None = None

    def request(self, method: str, url: str, *, auth: bool = True, **kwargs: Any) -> httpx.Response:
        headers: dict[str, str] = dict(kwargs.pop("headers", None) or {})
        if auth and self.token is not None and "Authorization" not in headers:
            headers["Authorization"] = f"Bearer {self.token}"

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ticklock.test") as client:
                response = await client.request(method, url, headers=headers, **kwargs)
                await response.aread()
                return response

        return asyncio.run(go())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    def stored(self) -> list[tuple[str, str, int]]:
        """Every job in the store as (id, name, version), straight from the store."""
        return [(j.id, j.name, j.version) for j in self.store.list_jobs(limit=10_000)]


def build_api(
    tmp_path: Path,
    *,
    token: str | None = None,
    max_body_bytes: int = 4096,
    max_payload_bytes: int = 256,
    max_timeout: float = 3600.0,
) -> tuple[ApiHarness, SQLiteStore]:
    store = SQLiteStore(tmp_path / "ticklock.db")
    registry = register_all(Registry(), only=(builtin.plugin,))  # whatever else is installed
    clock = FakeClock(API_START)
    service = JobService(store, registry, clock, Limits(max_timeout=max_timeout, max_payload_bytes=max_payload_bytes))
    metrics = PrometheusMetrics()
    app = local_app(ApiDeps(service, metrics.render), api_token=token, max_body_bytes=max_body_bytes)
    return ApiHarness(app=app, store=store, clock=clock, registry=registry, token=token), store


ApiFactory = Callable[..., ApiHarness]


@pytest.fixture
def api_factory(tmp_path: Path) -> Iterator[ApiFactory]:
    """Build an API harness with custom limits/token; each one gets its own database file."""
    stores: list[SQLiteStore] = []

    def factory(**kwargs: Any) -> ApiHarness:
        folder = tmp_path / f"api{len(stores)}"
        folder.mkdir()
        harness, store = build_api(folder, **kwargs)
        stores.append(store)
        return harness

    yield factory
    for store in stores:
        store.close()


@pytest.fixture
def api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory()


@pytest.fixture
def secured_api(api_factory: ApiFactory) -> ApiHarness:
    return api_factory(token=TOKEN)
