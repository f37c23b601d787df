"""AWS Signature Version 4 for the API function behind API Gateway (``AWS_IAM`` authorisation): what the
CLI and ``ticklock ui`` sign their calls with when ``--sigv4`` is given (or the URL is an
``execute-api`` one).

The signing is botocore's (``SigV4Auth``); the credentials come from botocore's standard chain (the
environment, ``~/.aws``, SSO, an instance or container role), the region from ``--region``, the URL's
host (``<id>.execute-api.<region>.amazonaws.com``) or the chain's configuration. What this module adds is
the mapping of one HTTP request onto what botocore signs: the method, the URL with its query exactly as
sent, the body's bytes, and only the headers that are signed (``host``, ``content-type``, ``x-amz-date``
and, with temporary credentials, ``x-amz-security-token``): the transport's own headers (user agent,
accept-encoding, content-length) are left out of the signature. ``tests/unit/test_sigv4.py`` checks it
against AWS's published test suite.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.session import Session

SERVICE = "execute-api"
_EXECUTE_API = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
SIGNED = ("host", "content-type", "x-amz-date", "x-amz-security-token")  # besides these, nothing is signed


class SigningError(Exception):
    """No credentials, or no region: says which and where they are looked for."""


def region_of(url: str) -> str | None:
    """The region an ``execute-api`` URL names, else None."""
    match = _EXECUTE_API.match(urlsplit(url).hostname or "")
    return match.group(1) if match else None


def is_gateway(url: str) -> bool:
    return region_of(url) is not None


class _Clocked(SigV4Auth):  # type: ignore[misc]  # botocore has no type hints
    """botocore's SigV4 with the signing time from ``now`` (the test suite's instant, or the system clock)."""

    def __init__(self, credentials: Credentials | ReadOnlyCredentials, service: str, region: str,
                 now: Callable[[], datetime]) -> None:  # fmt: skip
        super().__init__(credentials, service, region)
        self._now = now

    def add_auth(self, request: AWSRequest) -> None:
        # SigV4Auth.add_auth, step for step, with our clock instead of botocore's
        request.context["timestamp"] = self._now().astimezone(UTC).strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical = self.canonical_request(request)
        signature = self.signature(self.string_to_sign(request, canonical), request)
        self._inject_signature_to_request(request, signature)


class Signer:
    """Signs requests for one region and service with one set of credentials."""

    def __init__(
        self,
        credentials: Credentials | ReadOnlyCredentials,
        region: str,
        *,
        service: str = SERVICE,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.credentials, self.region, self.service, self.now = credentials, region, service, now

    @staticmethod
    def from_chain(url: str, region: str | None = None, profile: str | None = None) -> Signer:
        """A signer with the standard chain's credentials; ``SigningError`` when there are none."""
        session = Session(profile=profile)
        credentials = session.get_credentials()
        if credentials is None:
            raise SigningError(
                "--sigv4: no AWS credentials found (AWS_ACCESS_KEY_ID / AWS_PROFILE, ~/.aws, SSO, or a role)"
            )
        found = region or region_of(url) or session.get_config_variable("region")
        if not found:
            raise SigningError("--sigv4: no region: give --region, or set AWS_REGION (or AWS_DEFAULT_REGION)")
        return Signer(credentials, found)  # refreshable (SSO, a role): frozen afresh for each request

    def sign(self, method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes) -> dict[str, str]:
        """The headers to add to the request (``authorization``, ``x-amz-date`` and, with temporary
        credentials, ``x-amz-security-token``), signing every one of ``headers`` (``host`` taken from
        ``url`` when not among them): a caller passes only the ones it wants signed."""
        kept = [(k, v) for k, v in headers if k.lower() not in ("x-amz-date", "authorization")]
        if not any(k.lower() == "host" for k, _ in kept):
            kept.append(("host", urlsplit(url).netloc))
        request = AWSRequest(method=method.upper(), url=url, data=body)
        for name, value in kept:
            request.headers[name] = value
        freeze = getattr(self.credentials, "get_frozen_credentials", None)
        credentials = freeze() if freeze is not None else self.credentials
        _Clocked(credentials, self.service, self.region, self.now).add_auth(request)
        added = {"authorization": request.headers["Authorization"], "x-amz-date": request.headers["X-Amz-Date"]}
        token = request.headers.get("X-Amz-Security-Token")
        if token:
            added["x-amz-security-token"] = token
        return added


def canonical_query(query: str) -> str:
    """``query`` with each name and value percent-encoded as SigV4 wants (all but ``A-Za-z0-9-_.~``), in
    its order (the signer sorts what it signs; the wire keeps the client's order)."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in pairs)


def to_sign(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers of a request that are signed (``SIGNED``): not the transport's own."""
    return [(k, v) for k, v in headers if k.lower() in SIGNED]


class SigV4(httpx.Auth):
    """httpx's hook: each request signed as it is sent (its body read first)."""

    requires_request_body = True

    def __init__(self, signer: Signer) -> None:
        self.signer = signer

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        # the query sent in SigV4's canonical form, so that what is signed is what the gateway rebuilds
        # (a browser's or httpx's '+' for a space, a bare '*', would be decoded there and fail the check)
        request.url = request.url.copy_with(query=canonical_query(request.url.query.decode()).encode() or None)
        for name, value in self.signer.sign(
            request.method, str(request.url), to_sign(request.headers.multi_items()), request.content
        ).items():
            request.headers[name] = value
        yield request


def signed_headers(signer: Signer, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """``headers`` with the signature's added (for a caller that sends the request itself)."""
    return {**headers, **signer.sign(method, url, to_sign(headers.items()), body)}
