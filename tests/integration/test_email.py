"""The EmailSender adapters against real servers: SMTP on aiosmtpd (plain, STARTTLS, implicit TLS, AUTH),
started by each test on a loopback port, and SES on moto server."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import httpx
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.support.servers import free_port, self_signed_certificate
from ticklock.adapters.email.ses import SESSender, SESSendError
from ticklock.adapters.email.smtp import SMTPSender, SMTPSendError

FROM = "ticklock alerts <alerts@ticklock.test>"
TO = "ops@example.org"
SUBJECT = "ticklock alert: prïce ↑ on p1 — 10 % over"
BODY = "Le prix a augmenté de 10 %.\nDer Preis ist gestiegen. 价格上涨 ✓\n"
USER = "alerts@ticklock.test"
PASSWORD = "p@ss:w/rd %é?"  # every character that must be percent-encoded in a URL


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    tls: bool


@dataclass
class Recorder:
    """An aiosmtpd handler that keeps what it receives, refuses recipients at refused.test, and checks logins."""

    received: list[Received] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        if address.endswith("@refused.test"):
            return f"550 5.1.1 <{address}>: mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        assert isinstance(envelope.original_content, bytes) and envelope.mail_from is not None
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        tls = server.transport is not None and server.transport.get_extra_info("ssl_object") is not None
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message, tls))
        return "250 OK"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
            USER.encode(),
            PASSWORD.encode(),
        )
        if ok:
            self.logins.append(mechanism)
        return AuthResult(success=ok, handled=False)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, made by openssl."""
    folder = tmp_path_factory.mktemp("smtp-tls")
    crt, key = folder / "server.pem", folder / "server.key"
    self_signed_certificate(crt, key)
    return crt, key


@pytest.fixture
def server_tls(cert: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    return context


SMTPServer = Callable[..., tuple[int, Recorder]]


@pytest.fixture
def smtp_server() -> Iterator[SMTPServer]:
    """Start aiosmtpd on a free loopback port, with the SMTP options given; stopped after the test."""
    controllers: list[Controller] = []

    def start(**options: Any) -> tuple[int, Recorder]:
        recorder = Recorder()
        if options.pop("auth", False):
            options["authenticator"] = recorder.authenticate
        port = free_port()
        controller = Controller(recorder, hostname="127.0.0.1", port=port, **options)
        controller.start()
        controllers.append(controller)
        return port, recorder

    yield start
    for controller in controllers:
        controller.stop()


def send(url: str, to: str = TO, *, timeout: float = 10.0) -> None:
    sender = SMTPSender.from_url(url, FROM, timeout=timeout)

    async def send_and_settle() -> None:
        try:
            await sender.send(to, SUBJECT, BODY)
        finally:
            # after a failure on a TLS connection (a refused login), aiosmtplib closes it without waiting
            # for the server's close_notify; the scanner's loop lives on and finishes the close, but
            # asyncio.run would close this loop first and leave the socket to the GC (a ResourceWarning)
            await asyncio.sleep(0.1)

    asyncio.run(send_and_settle())


def fails(url: str, to: str = TO, *, timeout: float = 10.0) -> str:
    with pytest.raises(SMTPSendError) as caught:
        send(url, to, timeout=timeout)
    return str(caught.value)


def assert_delivered(recorder: Recorder, *, tls: bool) -> EmailMessage:
    [got] = recorder.received
    assert got.mail_from == "alerts@ticklock.test"
    assert got.rcpt_tos == [TO]
    assert got.tls is tls
    message = got.message
    assert message["Subject"] == SUBJECT
    assert message["From"] == FROM
    assert message["To"] == TO
    assert abs(time.time() - parsedate_to_datetime(message["Date"]).timestamp()) < 60
    assert message["Message-ID"].endswith("@ticklock.test>")
    assert message.get_content_type() == "text/plain"
    assert message.get_content_charset() == "utf-8"
    assert message.get_content().replace("\r\n", "\n") == BODY  # SMTP carries lines ending in CRLF
    return message


def test_plain_send_without_tls(smtp_server: SMTPServer) -> None:
    port, recorder = smtp_server()
    send(f"smtp://127.0.0.1:{port}")  # STARTTLS when offered: this server does not offer it
    assert_delivered(recorder, tls=False)


def test_each_email_has_its_own_message_id(smtp_server: SMTPServer) -> None:
    port, recorder = smtp_server()
    sender = SMTPSender.from_url(f"smtp://127.0.0.1:{port}?starttls=off", FROM)

    async def two() -> None:
        await asyncio.gather(sender.send(TO, SUBJECT, BODY), sender.send(TO, "second\r\nBcc: x@evil.test", BODY))

    asyncio.run(two())
    ids = {r.message["Message-ID"] for r in recorder.received}
    assert len(ids) == 2
    subjects = {r.message["Subject"] for r in recorder.received}
    assert subjects == {SUBJECT, "second Bcc: x@evil.test"}  # a line break cannot add a header
    assert all(r.message["Bcc"] is None and r.rcpt_tos == [TO] for r in recorder.received)


@pytest.mark.parametrize("starttls", ["", "&starttls=required"])
def test_starttls_with_a_private_ca(
    smtp_server: SMTPServer, server_tls: ssl.SSLContext, cert: tuple[Path, Path], starttls: str
) -> None:
    port, recorder = smtp_server(tls_context=server_tls, require_starttls=True)
    send(f"smtp://127.0.0.1:{port}?ca={cert[0]}{starttls}")
    assert_delivered(recorder, tls=True)


def test_an_unknown_ca_fails_unless_verification_is_off(smtp_server: SMTPServer, server_tls: ssl.SSLContext) -> None:
    port, recorder = smtp_server(tls_context=server_tls, require_starttls=True)
    error = fails(f"smtp://127.0.0.1:{port}")
    assert error.startswith(f"SMTP 127.0.0.1:{port}: TLS failed: ")
    assert "certificate verify failed" in error
    assert recorder.received == []
    send(f"smtp://127.0.0.1:{port}?tls_verify=0")
    assert_delivered(recorder, tls=True)


def test_starttls_required_refuses_a_server_without_it(smtp_server: SMTPServer) -> None:
    port, recorder = smtp_server()
    error = fails(f"smtp://127.0.0.1:{port}?starttls=required")
    assert error == f"SMTP 127.0.0.1:{port}: SMTP STARTTLS extension not supported by server."
    assert recorder.received == []


@pytest.mark.parametrize(("excluded", "mechanism"), [(["LOGIN"], "PLAIN"), (["PLAIN"], "LOGIN")])
def test_login_over_starttls(
    smtp_server: SMTPServer,
    server_tls: ssl.SSLContext,
    cert: tuple[Path, Path],
    excluded: list[str],
    mechanism: str,
) -> None:
    port, recorder = smtp_server(
        tls_context=server_tls, auth=True, auth_required=True, auth_require_tls=True, auth_exclude_mechanism=excluded
    )
    credentials = f"{quote(USER, safe='')}:{quote(PASSWORD, safe='')}"
    send(f"smtp://{credentials}@127.0.0.1:{port}?ca={cert[0]}")
    assert recorder.logins == [mechanism]
    assert_delivered(recorder, tls=True)

    error = fails(f"smtp://{quote(USER, safe='')}:wrong@127.0.0.1:{port}?ca={cert[0]}")
    assert error.startswith(f"SMTP 127.0.0.1:{port}: login refused: 535 ")
    # the server offers AUTH only after STARTTLS: no password goes out in clear
    error = fails(f"smtp://{credentials}@127.0.0.1:{port}?starttls=off")
    assert "AUTH extension is not supported" in error
    assert PASSWORD not in error
    assert recorder.logins == [mechanism] and len(recorder.received) == 1


def test_implicit_tls(smtp_server: SMTPServer, server_tls: ssl.SSLContext, cert: tuple[Path, Path]) -> None:
    # aiosmtpd counts only STARTTLS as TLS for auth_require_tls: on an implicit-TLS port it must be off
    port, recorder = smtp_server(ssl_context=server_tls, auth=True, auth_require_tls=False)
    credentials = f"{quote(USER, safe='')}:{quote(PASSWORD, safe='')}"
    send(f"smtps://{credentials}@127.0.0.1:{port}?ca={cert[0]}")
    assert recorder.logins == ["PLAIN"]
    assert_delivered(recorder, tls=True)
    error = fails(f"smtps://127.0.0.1:{port}")
    assert error.startswith(f"SMTP 127.0.0.1:{port}: TLS failed: ") and "certificate verify failed" in error


def test_a_refused_recipient_raises_with_the_reply_code(smtp_server: SMTPServer) -> None:
    port, recorder = smtp_server()
    error = fails(f"smtp://127.0.0.1:{port}", to="nobody@refused.test")
    assert error == (
        f"SMTP 127.0.0.1:{port}: recipient nobody@refused.test refused: "
        "550 5.1.1 <nobody@refused.test>: mailbox unavailable"
    )
    assert recorder.received == []


def test_a_closed_port_fails_fast() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    error = fails(f"smtp://127.0.0.1:{port}")
    assert time.monotonic() - started < 2
    assert error.startswith(f"SMTP 127.0.0.1:{port}: cannot connect: ")
    assert "Connect call failed" in error or "refused" in error


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) but never greets
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        error = fails(f"smtp://127.0.0.1:{port}", timeout=0.5)
        assert time.monotonic() - started < 3
    assert error.startswith(f"SMTP 127.0.0.1:{port}: ")
    assert "Timed out" in error or "no answer within 0.5 s" in error


def test_an_invalid_recipient_fails_before_connecting() -> None:
    port = free_port()
    assert fails(f"smtp://127.0.0.1:{port}", to="not an address") == "'not an address' is not an email address"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://host", "SMTP URL http://host: the scheme must be smtp:// or smtps://, not http"),
        ("smtp://", "SMTP URL smtp://: no host"),
        ("smtp://host:99999", "SMTP URL smtp://host:99999: the port must be a number from 1 to 65535"),
        ("smtp://host:abc", "SMTP URL smtp://host:abc: the port must be a number from 1 to 65535"),
        ("smtp://host/x", "SMTP URL smtp://host/x: unexpected path '/x'"),
        ("smtp://u:secret@host?port=1", "SMTP URL smtp://u:***@host?port=1: unknown option 'port'"),
        ("smtp://u:s3cr/t@host:x", "SMTP URL smtp://u:***@host:x: the port must be a number from 1 to 65535"),
        ("smtp://:secret@host", "SMTP URL smtp://:***@host: a password without a user"),
        ("smtp://user@host", "SMTP URL smtp://user@host: user 'user' has no password"),
        ("smtp://host?starttls=yes", "SMTP URL smtp://host?starttls=yes: starttls must be one of auto, required, off"),
        ("smtp://host?starttls=off&starttls=off", "option 'starttls' is given twice"),
        ("smtps://host?starttls=required", "starttls does not apply to smtps://"),
        ("smtp://host?tls_verify=maybe", "tls_verify must be 1 or 0, not 'maybe'"),
        ("smtp://host?starttls=off&tls_verify=0", "ca and tls_verify apply to TLS, which starttls=off turns off"),
        ("smtp://host?tls_verify=0&ca=/etc/hosts", "ca and tls_verify=0 contradict each other"),
        ("smtp://host?ca=/nonexistent.pem", "ca file '/nonexistent.pem' does not exist"),
        ("smtp://host?ca=/etc/hostname", "ca file '/etc/hostname' holds no usable PEM certificate"),
    ],
)
def test_bad_urls_are_refused_with_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^SMTP URL ") as caught:
        SMTPSender.from_url(url, FROM)
    assert problem in str(caught.value)
    assert "secret" not in str(caught.value) and "s3cr" not in str(caught.value)


def test_urls_that_configure_each_mode(cert: tuple[Path, Path]) -> None:
    plain = SMTPSender.from_url("smtp://relay.example:25?starttls=off", FROM)
    assert (plain.host, plain.port, plain.tls, plain.username) == ("relay.example", 25, "off", None)
    submission = SMTPSender.from_url("smtp://a%40b.example:p%25w%3A@mail.example", FROM)
    assert (submission.port, submission.tls, submission.username) == (587, "auto", "a@b.example")
    assert SMTPSender.from_url(f"smtps://mail.example?ca={cert[0]}", FROM).port == 465
    with pytest.raises(ValueError, match="from_address 'nobody' is not an email address"):
        SMTPSender.from_url("smtp://mail.example", "nobody")


# --- Amazon SES on moto server


def sent_by_moto(endpoint: str, subject: str) -> list[dict[str, Any]]:
    """What moto's SES backend recorded: its model dump at /moto-api/data.json (the server's dashboard data)."""
    models = httpx.get(f"{endpoint}/moto-api/data.json", timeout=5).json()
    return [m for m in models["ses"]["Message"] if m["subject"] == subject]


def test_ses_sends_through_moto(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sender_address = f"alerts-{uuid.uuid4().hex[:8]}@ticklock.test"
    boto3.client("sesv2", endpoint_url=moto_endpoint).create_email_identity(EmailIdentity=sender_address)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)  # the default client finds moto as boto3 does
    subject = f"{SUBJECT} {uuid.uuid4().hex[:8]}"
    asyncio.run(SESSender(sender_address).send(TO, subject + "\nsecond line", BODY))
    [sent] = sent_by_moto(moto_endpoint, subject + " second line")
    assert sent["source"] == sender_address
    assert sent["destinations"] == {"ToAddresses": [TO]}
    assert sent["body"] == BODY


def test_ses_refuses_an_unverified_sender(moto_endpoint: str) -> None:
    client = boto3.client("sesv2", endpoint_url=moto_endpoint)
    sender = SESSender("stranger@unverified.test", client=client)
    subject = f"unverified {uuid.uuid4().hex[:8]}"
    with pytest.raises(SESSendError) as caught:
        asyncio.run(sender.send(TO, subject, BODY))
    assert str(caught.value) == (
        "SES MessageRejected: Email address not verified stranger@unverified.test "
        f"(from stranger@unverified.test to {TO})"
    )
    assert sent_by_moto(moto_endpoint, subject) == []


def test_one_error_and_one_factory_for_every_sender() -> None:
    """The engine's EmailSender port: both adapters raise EmailUnavailable (the old names are aliases),
    and adapters.email.sender_from picks the adapter TICKLOCK_EMAIL names."""
    from types import SimpleNamespace

    from ticklock.adapters.email import sender_from
    from ticklock.errors import EmailUnavailable

    assert SMTPSendError is EmailUnavailable and SESSendError is EmailUnavailable
    assert sender_from(SimpleNamespace(email="", email_from="a@example.com")) is None
    smtp = sender_from(SimpleNamespace(email="smtp://127.0.0.1:2525", email_from="a@example.com"))
    assert isinstance(smtp, SMTPSender)
    with pytest.raises(ValueError, match="the scheme must be smtp:// or smtps://"):
        sender_from(SimpleNamespace(email="ftp://x", email_from="a@example.com"))
