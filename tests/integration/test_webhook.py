"""The engine's webhook notifier against a real HTTP server on loopback: signed JSON, 2xx only, no
redirects followed, a bounded wait, errors that name the receiver and not its credentials."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.servers import free_port
from ticklock.adapters.webhook import HttpWebhook, webhook_from
from ticklock.adapters.webhook.http import signature
from ticklock.errors import WebhookUnavailable
from ticklock.handlers.plugin import Context, Plugin, Registry
from ticklock.runtimes.plugins import Plugins
from ticklock.settings import Settings


@dataclass
class Receiver:
    url: str
    calls: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    answer: int = 204
    delay: float = 0.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            box.calls.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            time.sleep(box.delay)
            self.send_response(box.answer)
            if box.answer in (301, 302, 307, 308):
                self.send_header("location", "/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    box.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield box
    server.shutdown()
    server.server_close()


def test_a_signed_call_carries_the_document_and_a_signature_the_receiver_can_check(receiver: Receiver) -> None:
    sender = HttpWebhook(secret="s3cret", clock=lambda: 1_764_590_400.7)
    asyncio.run(sender.post(f"{receiver.url}/hooks/ticklock", {"job": "nightly", "status": "failed", "n": 1.5}))
    [(path, headers, body)] = receiver.calls
    assert path == "/hooks/ticklock"
    assert json.loads(body) == {"job": "nightly", "status": "failed", "n": 1.5}
    assert headers["content-type"] == "application/json" and headers["x-ticklock-timestamp"] == "1764590400"
    expected = hmac.new(b"s3cret", b"1764590400." + body, hashlib.sha256).hexdigest()
    assert headers["x-ticklock-signature"] == f"sha256={expected}" == signature("s3cret", "1764590400", body)


def test_without_a_secret_the_call_is_not_signed(receiver: Receiver) -> None:
    asyncio.run(HttpWebhook().post(receiver.url, {"ü": "✓"}))
    [(_, headers, body)] = receiver.calls
    assert "x-ticklock-signature" not in headers and "x-ticklock-timestamp" not in headers
    assert body == '{"ü":"✓"}'.encode()


@pytest.mark.parametrize("status", [500, 404, 302])
def test_an_answer_other_than_2xx_is_not_a_delivery(receiver: Receiver, status: int) -> None:
    receiver.answer = status
    with pytest.raises(WebhookUnavailable, match=f"webhook {receiver.url} answered {status}"):
        asyncio.run(HttpWebhook(secret="k").post(f"{receiver.url}/x", {}))
    assert [path for path, _, _ in receiver.calls] == ["/x"]  # a redirect is not followed


def test_a_slow_receiver_is_given_up_on_after_the_timeout(receiver: Receiver) -> None:
    receiver.delay = 3.0
    with pytest.raises(WebhookUnavailable, match=r"did not answer within 0\.3 s"):
        asyncio.run(HttpWebhook(timeout=0.3).post(receiver.url, {}))


def test_a_refused_connection_names_the_receiver_without_its_credentials() -> None:
    url = f"http://user:pa55word@127.0.0.1:{free_port()}/hook"
    with pytest.raises(WebhookUnavailable) as caught:
        asyncio.run(HttpWebhook().post(url, {}))
    assert "127.0.0.1" in str(caught.value) and "pa55word" not in str(caught.value)


@pytest.mark.parametrize("url", ["ftp://host/x", "file:///etc/passwd", "http:///nohost", "hook"])
def test_only_http_urls_are_called(url: str) -> None:
    with pytest.raises(ValueError, match="a webhook URL must be http"):
        asyncio.run(HttpWebhook().post(url, {}))


def test_a_document_that_is_not_json_is_refused(receiver: Receiver) -> None:
    with pytest.raises(ValueError, match="must be JSON: Out of range float values are not JSON compliant"):
        asyncio.run(HttpWebhook().post(receiver.url, {"x": float("nan")}))
    with pytest.raises(ValueError, match="must be JSON: Object of type object is not JSON serializable"):
        asyncio.run(HttpWebhook().post(receiver.url, {"x": object()}))
    assert receiver.calls == []


def test_a_plugin_gets_the_engines_webhook_sender_built_once(receiver: Receiver) -> None:
    got: list[Any] = []

    def keep(registry: Registry, context: Context[None]) -> None:
        got.extend([context.webhook(), context.webhook()])

    environ = {"TICKLOCK_WEBHOOK_SECRET": "k1", "TICKLOCK_WEBHOOK_TIMEOUT": "2.5"}
    settings = Settings.load(environ=environ, plugins=(Plugin("hooks", keep),))
    Plugins(settings).registry()
    first, again = got
    assert isinstance(first, HttpWebhook) and first is again
    asyncio.run(first.post(receiver.url, {"a": 1}))
    [(_, headers, body)] = receiver.calls
    assert headers["x-ticklock-signature"] == signature("k1", headers["x-ticklock-timestamp"], body)
    assert "k1" not in json.dumps(settings.as_dict(), default=str)
    assert isinstance(webhook_from(settings), HttpWebhook)
