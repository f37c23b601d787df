"""The ``WebhookSender`` port over HTTP(S) (httpx): one POST of a JSON document per call.

The body is compact UTF-8 JSON. With a secret (``TICKLOCK_WEBHOOK_SECRET``) every call is signed, so a
receiver can tell it came from this deployment and is not a replay: ``X-Ticklock-Timestamp`` is the Unix
time of the call and ``X-Ticklock-Signature`` is ``sha256=`` and the hex HMAC-SHA256, keyed by the
secret, of ``<timestamp>.<body>``. Redirects are not followed (a signed call goes where it was sent);
``timeout`` bounds the whole call. A 2xx answer is a delivery; anything else - another status, no
answer in time, a refused connection, a TLS failure - raises ``WebhookUnavailable`` naming the host
and, where there is one, the status: the caller keeps the notification and tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from ticklock.errors import WebhookUnavailable

USER_AGENT = "ticklock-webhook"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What ``X-Ticklock-Signature`` carries for this timestamp and body (for receivers to compare)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class HttpWebhook:
    """The ``WebhookSender`` port over HTTP(S)."""

    def __init__(
        self, *, secret: str | None = None, timeout: float = 10.0, clock: Callable[[], float] = time.time
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self._secret = secret
        self._timeout = timeout
        self._clock = clock

    async def post(self, url: str, document: Mapping[str, Any]) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a webhook URL must be http(s)://host/..., got {url!r}")
        try:
            body = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a webhook's document must be JSON: {exc}") from None
        headers = {"content-type": "application/json", "user-agent": USER_AGENT}
        if self._secret:
            timestamp = str(int(self._clock()))
            headers["x-ticklock-timestamp"] = timestamp
            headers["x-ticklock-signature"] = signature(self._secret, timestamp, body)
        where = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # no credentials in messages
        try:
            async with asyncio.timeout(self._timeout):
                async with httpx.AsyncClient(timeout=self._timeout, follow_redirects=False) as client:
                    response = await client.post(url, content=body, headers=headers)
        except httpx.InvalidURL as exc:
            raise ValueError(f"a webhook URL must be http(s)://host/..., got {url!r}: {exc}") from None
        except (TimeoutError, httpx.TimeoutException):
            raise WebhookUnavailable(f"webhook {where} did not answer within {self._timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise WebhookUnavailable(f"webhook {where}: {type(exc).__name__}: {exc}") from None
        if not 200 <= response.status_code < 300:
            raise WebhookUnavailable(f"webhook {where} answered {response.status_code}")
