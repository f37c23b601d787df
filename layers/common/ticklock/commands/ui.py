"""``ticklock ui --api URL``: the dashboard on an operator's machine, for a ticklock whose API is not
``ticklock serve`` (the API function behind API Gateway, IAM-authorised).

It listens on loopback only, serves the dashboard's files (the same ones ``ticklock serve`` ships) and
passes every other request on to ``URL``, signed with SigV4 from the standard AWS credential chain
(``--sigv4``, or by itself for an ``execute-api`` URL) or with the bearer token (``--token``). So the
browser talks to this machine alone, the credentials never reach the page, and nothing public is added
to the deployment.

Guards, since any web page the operator opens can send requests to loopback: a request whose ``Host``
is not this listener's (DNS rebinding) or whose ``Origin`` is another site's is refused with 403; only
the API's methods pass; a body over ``MAX_BODY`` is refused; the upstream call has a timeout. A bearer
token the API refuses stops it at the start, with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx

from ticklock.api.dashboard import HEADERS, assets
from ticklock.commands.client import api_url
from ticklock.commands.sigv4 import Signer, SigningError, SigV4, is_gateway

MAX_BODY = 1024 * 1024
METHODS = ("GET", "HEAD", "POST", "PATCH", "DELETE")
PASSED_ON = ("content-type", "location", "allow", "retry-after", "www-authenticate")  # the answer's headers kept
DEFAULT_PORT = 8787


def add_command(commands: Any) -> None:
    ui = commands.add_parser(
        "ui",
        help="serve the dashboard on this machine for a remote API (signing with SigV4 for API Gateway)",
        description="Serve the dashboard on 127.0.0.1 and pass its API calls on to --api, signed with SigV4 "
        "(credentials from the standard AWS chain) or with the bearer token.",
    )
    ui.add_argument(
        "--api", default=None, metavar="URL", help="the REST API (env TICKLOCK_API_URL); HOST:PORT means http://"
    )
    ui.add_argument("--token", default=None, help="the bearer token (env TICKLOCK_API_TOKEN)")
    add_signing_options(ui)
    ui.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the local port ({DEFAULT_PORT}; 0: any free)")


def add_signing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sigv4",
        action="store_true",
        default=None,
        help="sign requests with SigV4 (env TICKLOCK_API_SIGV4=1; by itself for an execute-api URL)",
    )
    parser.add_argument("--region", default=None, help="the region to sign for (the URL's, or AWS_REGION)")
    parser.add_argument("--profile", default=None, help="the AWS profile to take credentials from")


def signer_for(args: argparse.Namespace, base: str) -> Signer | None:
    """The SigV4 signer the options ask for (None: no signing); ``SigningError`` when it cannot be made,
    or when ``--token`` is given too (both would take the Authorization header)."""
    wanted = args.sigv4 if args.sigv4 is not None else os.environ.get("TICKLOCK_API_SIGV4") == "1"
    if not (wanted or is_gateway(base)):
        return None
    if args.token:
        raise SigningError("--token and SigV4 both take the Authorization header; give one")
    return Signer.from_chain(base, args.region, args.profile)


def run(args: argparse.Namespace) -> int:
    given = args.api or os.environ.get("TICKLOCK_API_URL")
    if not given:
        print("ticklock: error: ui needs --api URL (or TICKLOCK_API_URL), http:// or https://", file=sys.stderr)
        return 2
    try:
        base = api_url(given)
        signer = signer_for(args, base)
    except (ValueError, SigningError) as exc:
        print(f"ticklock: error: {exc}", file=sys.stderr)
        return 2
    # behind API Gateway's IAM check the signature is the credential
    token = None if signer is not None else args.token or os.environ.get("TICKLOCK_API_TOKEN")
    if token and (problem := token_refused(base, token)):
        print(f"ticklock: error: {problem}", file=sys.stderr)
        return 2
    server = proxy(base, signer=signer, token=token, port=args.port)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    how = "SigV4-signed" if signer else "with the bearer token" if token else "as they come"
    print(f"ticklock ui: http://{host}:{port}/ui/ -> {base} ({how}); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def token_refused(base: str, token: str) -> str | None:
    """Why the API refuses ``token``, asked once before listening: the proxy puts it on every call, so a
    wrong one would have the dashboard's login refuse every token typed into it. An API not reachable yet
    is no reason to refuse to start (the dashboard says so when it is asked)."""
    try:
        answer = httpx.get(f"{base}/jobs", params={"limit": 1}, headers={"authorization": f"Bearer {token}"},
                           timeout=10.0, follow_redirects=False)  # fmt: skip
    except httpx.HTTPError:
        return None
    if answer.status_code == HTTPStatus.UNAUTHORIZED:
        return f"{base} refused the bearer token (401): check --token or TICKLOCK_API_TOKEN"
    return None


def proxy(base: str, *, signer: Signer | None, token: str | None, port: int) -> ThreadingHTTPServer:
    """The listener (not yet serving): the dashboard's files, and the API calls passed on to ``base``."""
    files = assets()
    parsed = httpx.URL(base)
    upstream = (parsed.scheme, parsed.host, parsed.port)  # every call goes there, whatever the path says
    client = httpx.Client(timeout=httpx.Timeout(30.0, connect=10.0), auth=SigV4(signer) if signer else None,
                          follow_redirects=False, headers={"user-agent": "ticklock-ui"})  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        server_version = "ticklock-ui"
        protocol_version = "HTTP/1.1"
        timeout = 30  # seconds a connection may take to send a request (a stalled one is closed)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._handle()

        do_HEAD = do_POST = do_PATCH = do_DELETE = do_PUT = do_OPTIONS = do_GET

        def _handle(self) -> None:
            if not self._same_site():
                return self._send(HTTPStatus.FORBIDDEN, b'{"error":"forbidden","message":"not this listener"}')
            path = self.path.split("?", 1)[0]
            if path in ("/", "/ui"):
                return self._send(HTTPStatus.FOUND, b"", {"location": "/ui/"})
            if path.startswith("/ui/") and self.command in ("GET", "HEAD"):
                body, kind = files.get(path if path != "/ui/" else "/ui/index.html", (b"", ""))
                if not kind:
                    return self._send(HTTPStatus.NOT_FOUND, b'{"error":"not_found","message":"no such file"}')
                return self._send(HTTPStatus.OK, body, {"content-type": kind, **HEADERS})
            if self.command not in METHODS:
                return self._send(HTTPStatus.METHOD_NOT_ALLOWED, b'{"error":"method_not_allowed"}')
            self._pass_on()

        def _same_site(self) -> bool:
            port = listening
            here = {f"127.0.0.1:{port}", f"localhost:{port}"}
            origin = self.headers.get("origin")
            if origin is not None and urlsplit(origin).netloc not in here:
                return False
            return self.headers.get("host", "") in here

        def _pass_on(self) -> None:
            if self.headers.get("transfer-encoding") is not None:
                return self._send(HTTPStatus.LENGTH_REQUIRED, b'{"error":"length_required"}', close=True)
            given_length = self.headers.get("content-length") or "0"
            if not given_length.isdigit() or int(given_length) > MAX_BODY:
                return self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b'{"error":"too_large"}', close=True)
            length = int(given_length)
            target = httpx.URL(base + self.path)
            if not self.path.startswith("/") or (target.scheme, target.host, target.port) != upstream:
                return self._send(HTTPStatus.BAD_REQUEST, b'{"error":"bad_request","message":"not a path"}')
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
            given = self.headers.get("authorization")
            if token:
                headers["authorization"] = f"Bearer {token}"
            elif given and signer is None:
                headers["authorization"] = given  # the page's own login, to a token-guarded API
            try:
                answer = client.request(self.command, target, headers=headers, content=body)
            except httpx.HTTPError as exc:
                said = f"the API at {base} did not answer: {type(exc).__name__}"
                return self._send(
                    HTTPStatus.BAD_GATEWAY, json.dumps({"error": "unavailable", "message": said}).encode()
                )
            kept = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_ON}
            self._send(answer.status_code, answer.content, kept)

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, close: bool = False) -> None:
            self.send_response(status)
            for name, value in (headers or {"content-type": "application/json"}).items():
                self.send_header(name, value)
            if status not in (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED):
                self.send_header("content-length", str(len(body)))
            if close:
                self.send_header("connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    listening = int(server.server_address[1])
    return server
