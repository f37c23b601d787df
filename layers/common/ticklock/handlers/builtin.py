"""The built-in handlers: ``noop`` and ``http.check`` (the reference's health checks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.handlers.plugin import Context, Plugin


def noop(ctx: HandlerContext) -> None:
    """Does nothing and succeeds: for tests, benchmarks and trying ticklock out."""
    return None


class CheckFailed(Exception):
    """The checked URL answered with an unexpected status."""


def _expected(payload: Mapping[str, Any]) -> set[int]:
    expect = payload.get("expect_status", 200)
    values = expect if isinstance(expect, list) else [expect]
    try:
        return {int(v) for v in values}
    except (TypeError, ValueError):
        raise ValueError(f"expect_status must be a status code or a list of them, got {expect!r}") from None


async def http_check(ctx: HandlerContext) -> None:
    """GET or HEAD a URL; succeed when it answers an expected status within the job's timeout.

    Payload: ``url`` (required), ``method`` (GET or HEAD, default GET), ``expect_status`` (a code or a
    list, default 200), ``headers`` (an object of strings).
    """
    payload = ctx.payload
    url = payload.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"payload.url must be an http(s) URL, got {url!r}")
    method = str(payload.get("method", "GET")).upper()
    if method not in ("GET", "HEAD"):
        raise ValueError(f"payload.method must be GET or HEAD, got {method!r}")
    headers = {str(k): str(v) for k, v in dict(payload.get("headers") or {}).items()}
    expected = _expected(payload)
    # the job's deadline decides (the engine cancels the call there, a timeout); httpx's own is a backstop
    async with httpx.AsyncClient(timeout=ctx.remaining() + 1.0, follow_redirects=True) as client:
        response = await client.request(method, url, headers=headers)
    if response.status_code not in expected:
        raise CheckFailed(f"{method} {url} answered {response.status_code}, expected {sorted(expected)}")
    ctx.logger.info("http.check.ok", extra={"url": url, "status": response.status_code})


def register(registry: Registry, context: Context[None] | None = None) -> None:
    registry.register("noop", noop)
    registry.register("http.check", http_check)


plugin = Plugin(name="builtin", register=register, description="noop and http.check")
"""ticklock's own entry point in the ``ticklock.plugins`` group."""
