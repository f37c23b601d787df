"""A stand-in for API Gateway in front of the API function, until an emulator's is in the suite: it checks
each request's SigV4 signature as ``AWS_IAM`` authorisation does, with a verifier of its own written from
AWS's description (not botocore's code), turns a signed request into the REST API's proxy event (the
stage stripped from the path, as API Gateway does) and calls the real handler, ``functions/api/app.py``.

Run as ``python -m tests.support.gateway --port P --key AK --secret SK --region R [--stage Prod]
--log FILE``, with the ticklock settings (``TICKLOCK_DB``...) in its environment. ``FILE`` gets one JSON
line per request: its method and path, whether the signature held (and why not), and the handler's
status, so a test can show which requests reached the handler.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import importlib.util
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

REPO = Path(__file__).resolve().parents[2]
SKEW = timedelta(minutes=5)  # how far x-amz-date may be from now, as AWS allows
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def verify(
    method: str, target: str, headers: dict[str, str], body: bytes, *, key: str, secret: str, region: str,
    now: datetime,
) -> str | None:  # fmt: skip
    """None when the request is signed by ``key``/``secret`` for ``region``'s execute-api, else why not."""
    match = _AUTH.match(headers.get("authorization", ""))
    if match is None:
        return "missing or malformed Authorization"
    if (match["key"], match["region"], match["service"]) != (key, region, "execute-api"):
        return f"wrong credential scope {match['key']}/{match['region']}/{match['service']}"
    stamp = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "missing or malformed X-Amz-Date"
    if abs(now - signed_at) > SKEW or stamp[:8] != match["date"]:
        return "the signature's date is out of range"
    names = match["signed"].split(";")
    if "host" not in names or any(n not in headers for n in names):
        return "a signed header is missing"
    parts = urlsplit(target)
    # the path as sent, encoded once more (every service but S3); the query's pairs decoded, sorted, encoded
    path = quote(parts.path or "/", safe="/-_.~")
    pairs = sorted((_encode(k), _encode(v)) for k, v in parse_qsl(parts.query, keep_blank_values=True))
    canonical = "\n".join([
        method,
        path,
        "&".join(f"{k}={v}" for k, v in pairs),
        "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names),
        match["signed"],
        hashlib.sha256(body).hexdigest(),
    ])  # fmt: skip
    scope = f"{match['date']}/{region}/execute-api/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signing = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), match["date"]), region), "execute-api"), "aws4_request")
    expected = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, match["signature"]) else "the signature does not match"


def _handler() -> Any:
    spec = importlib.util.spec_from_file_location("api_function", REPO / "functions" / "api" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def event_of(method: str, target: str, headers: dict[str, str], body: bytes, stage: str) -> dict[str, Any]:
    """The REST API's proxy event (format 1.0) for a request, as API Gateway builds it."""
    parts = urlsplit(target)
    path = parts.path[len(stage) :] if stage and parts.path.startswith(stage) else parts.path
    multi: dict[str, list[str]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        multi.setdefault(name, []).append(value)
    return {
        "resource": "/{proxy+}",
        "path": path or "/",
        "httpMethod": method,
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "requestContext": {"stage": stage.strip("/") or "$default", "httpMethod": method,
                           "identity": {"userArn": "arn:aws:iam::123456789012:user/operator"}},
        "body": body.decode("utf-8", "surrogateescape") if body else None,
        "isBase64Encoded": False,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--port", "--key", "--secret", "--region", "--log"):
        parser.add_argument(name, required=True)
    parser.add_argument("--stage", default="/Prod")
    args = parser.parse_args()
    handler = _handler()
    log_path = Path(args.log)
    writing = threading.Lock()

    class Gateway(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *values: Any) -> None:
            pass

        def do_GET(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            problem = verify(self.command, self.path, headers, body, key=args.key, secret=args.secret,
                             region=args.region, now=datetime.now(UTC))  # fmt: skip
            record: dict[str, Any] = {"method": self.command, "path": self.path, "signed": problem is None}
            if problem is not None:
                record["problem"] = problem
                status, out, kinds = (
                    403,
                    json.dumps({"message": problem}).encode(),
                    {"content-type": "application/json"},
                )
            else:
                answer = handler(event_of(self.command, self.path, headers, body, args.stage), None)
                status, kinds = answer["statusCode"], answer.get("headers") or {}
                out = answer.get("body", "").encode() if not answer.get("isBase64Encoded") else b""
                record["handler_status"] = status
            with writing, log_path.open("a") as log:
                log.write(json.dumps(record) + "\n")
            self.send_response(status)
            for name, value in kinds.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            if status not in (204, 304):
                self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out if status not in (204, 304) else b"")

        do_POST = do_PATCH = do_DELETE = do_PUT = do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", int(args.port)), Gateway)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
