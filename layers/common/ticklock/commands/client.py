"""A client of ticklock's REST API: the bearer token, JSON in and out, and errors that say what the API said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx


class ApiError(Exception):
    """The API answered with an error: its status and its message (and the fields it names)."""

    def __init__(self, status: int, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or []


class Unreachable(Exception):
    """Nothing answered at the API's address."""


class NotTheApi(Unreachable):
    """Something answered at the API's address, but not as a ticklock API (an HTML page, another server)."""


def api_url(text: str) -> str:
    """The API's base URL from what a user typed: ``host:port`` alone means ``http://host:port``, as curl
    reads it; a scheme other than http or https is refused with ``ValueError``."""
    url = text.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--api {text!r}: the API's address is http://HOST:PORT or https://HOST (or HOST:PORT)")
    return url


class ApiClient:
    def __init__(
        self, base: str, token: str | None = None, *, auth: httpx.Auth | None = None, timeout: float = 10.0
    ) -> None:
        """``auth``: a request signer (``sigv4.SigV4``) for an IAM-authorised API Gateway."""
        self.base = base.rstrip("/")
        headers = {"accept": "application/json", "user-agent": "ticklock-cli"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._client = httpx.Client(base_url=self.base, headers=headers, timeout=timeout, auth=auth)

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None) -> Any:
        """The answer's JSON (None for 204); raises ``ApiError`` for a 4xx/5xx, ``Unreachable`` if none, or if
        the answer is not JSON (another server at that address)."""
        try:
            response = self._client.request(method, path, params=params, json=body)
        except httpx.HTTPError as exc:
            raise Unreachable(f"{self.base}: {type(exc).__name__}: {exc}") from None
        data: Any = None
        if response.status_code != 204 and response.content:
            try:
                data = response.json()
            except ValueError:
                raise self.not_the_api(response) from None
        if response.status_code >= 400:
            message = data.get("message", response.reason_phrase) if isinstance(data, dict) else str(data)
            details = data.get("details") if isinstance(data, dict) else None
            raise ApiError(response.status_code, str(message), details)
        return data

    def not_the_api(self, response: httpx.Response) -> NotTheApi:
        """What to say of an answer that is not the API's: its status and its kind, never its page."""
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        said = f"{response.status_code} {response.reason_phrase}".strip()
        return NotTheApi(f"{self.base} answered ({said}, {kind}) but is not a ticklock API; is --api right?")

    def close(self) -> None:
        self._client.close()
