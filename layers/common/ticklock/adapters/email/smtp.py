"""The ``EmailSender`` port on an SMTP server (aiosmtplib), configured from one URL.

``smtp://user:pass@host:587`` upgrades with STARTTLS when the server offers it (``?starttls=required``
refuses a server that does not, ``?starttls=off`` never tries); ``smtps://user:pass@host:465`` is TLS
from the first byte. The port defaults to 587 (submission) and 465; user and password are
percent-decoded. Certificates are checked against the system's CAs, or only against ``?ca=/path.pem``
(a private CA); ``?tls_verify=0`` checks nothing. A bad URL raises ``ValueError`` naming the problem,
with the password masked. With a password, prefer ``starttls=required`` or ``smtps://``: in ``auto`` a
server (or a man in the middle) that does not offer STARTTLS gets the login in clear.

One connection per email (connect, TLS, login, send, quit): a scanner run sends a handful, and no pooled
connection can go stale between runs. ``timeout`` (10 s) bounds the whole send. Any failure (refused
connection, TLS, login, a refused sender or recipient, a timeout) raises ``SMTPSendError`` with the server
and, where there is one, the reply code. A send cancelled after the server took the message may be sent
again by the next run: delivery is at least once.
"""

from __future__ import annotations

import asyncio
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import aiosmtplib

from ticklock.errors import EmailUnavailable

TLSMode = Literal["auto", "required", "off", "implicit"]
DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
_STARTTLS: dict[str, TLSMode] = {"auto": "auto", "required": "required", "off": "off"}
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


SMTPSendError = EmailUnavailable  # its former name, kept for one release


class SMTPSender:
    """The ``EmailSender`` port on SMTP; ``from_url`` builds one from ``smtp://`` or ``smtps://``."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        from_address: str,
        username: str | None = None,
        password: str | None = None,
        tls: TLSMode = "auto",
        tls_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
    ) -> None:
        if "@" not in parseaddr(from_address)[1]:
            raise ValueError(f"from_address {from_address!r} is not an email address")
        if (username is None) != (password is None):
            raise ValueError("SMTP login needs both a user and a password")
        if timeout <= 0:
            raise ValueError(f"timeout must be more than 0 s, not {timeout}")
        self.host = host
        self.port = port
        self.from_address = from_address
        self.username = username
        self._password = password
        self.tls = tls
        self.timeout = timeout
        # built once: loading a CA store is file I/O that need not happen per email
        self._tls_context = None if tls == "off" else (tls_context or ssl.create_default_context())
        self._domain = parseaddr(from_address)[1].rpartition("@")[2]

    @classmethod
    def from_url(cls, url: str, from_address: str, *, timeout: float = 10.0) -> SMTPSender:
        """An ``SMTPSender`` from ``smtp[s]://[user:password@]host[:port][?starttls=&tls_verify=&ca=]``."""
        shown = _masked(url)

        def bad(problem: str) -> ValueError:
            return ValueError(f"SMTP URL {shown}: {problem}")

        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            raise bad(f"the scheme must be smtp:// or smtps://, not {parts.scheme or 'none'}")
        if not parts.hostname:
            raise bad("no host")
        try:
            port = parts.port or DEFAULT_PORTS[scheme]
        except ValueError:
            raise bad("the port must be a number from 1 to 65535") from None
        if parts.path not in ("", "/"):
            raise bad(f"unexpected path {parts.path!r}")
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        if username is None and password is not None:
            raise bad("a password without a user")
        if username is not None and not password:
            raise bad(f"user {username!r} has no password")

        options: dict[str, str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key not in ("starttls", "tls_verify", "ca"):
                raise bad(f"unknown option {key!r} (known: starttls, tls_verify, ca)")
            if key in options:
                raise bad(f"option {key!r} is given twice")
            options[key] = value

        tls: TLSMode
        if scheme == "smtps":
            if "starttls" in options:
                raise bad("starttls does not apply to smtps://, which is TLS from the start")
            tls = "implicit"
        else:
            starttls = _STARTTLS.get(options.get("starttls", "auto").lower())
            if starttls is None:
                raise bad(f"starttls must be one of {', '.join(_STARTTLS)}, not {options['starttls']!r}")
            tls = starttls

        verify = _BOOLEANS.get(options.get("tls_verify", "1").lower())
        if verify is None:
            raise bad(f"tls_verify must be 1 or 0, not {options['tls_verify']!r}")
        ca = options.get("ca")
        if tls == "off" and ("ca" in options or "tls_verify" in options):
            raise bad("ca and tls_verify apply to TLS, which starttls=off turns off")
        if ca is not None and not verify:
            raise bad("ca and tls_verify=0 contradict each other (a CA is only used to verify)")

        context: ssl.SSLContext | None = None
        if tls != "off":
            if ca is not None:
                if not ca or not Path(ca).is_file():
                    raise bad(f"ca file {ca!r} does not exist")
                try:
                    context = ssl.create_default_context(cafile=ca)  # trusts this CA only, not the system's
                except ssl.SSLError as exc:
                    raise bad(f"ca file {ca!r} holds no usable PEM certificate ({exc})") from exc
            elif not verify:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        return cls(
            host=parts.hostname,
            port=port,
            from_address=from_address,
            username=username,
            password=password,
            tls=tls,
            tls_context=context,
            timeout=timeout,
        )

    def message(self, to: str, subject: str, body: str) -> EmailMessage:
        """The email as sent: plain text in UTF-8 with Subject, From, To, Date and Message-ID."""
        if "@" not in parseaddr(to)[1]:
            raise SMTPSendError(f"{to!r} is not an email address")
        message = EmailMessage()
        try:
            # a line break in a header would end it (or inject another): subjects are one line
            message["Subject"] = " ".join(subject.splitlines())
            message["From"] = self.from_address
            message["To"] = to
        except ValueError as exc:
            raise SMTPSendError(f"cannot write the message headers: {exc}") from exc
        message["Date"] = formatdate(usegmt=True)
        # make_msgid's default domain is socket.getfqdn(), a DNS lookup: the sender's domain is enough
        message["Message-ID"] = make_msgid(domain=self._domain)
        message.set_content(body, charset="utf-8")
        return message

    async def send(self, to: str, subject: str, body: str) -> None:
        message = self.message(to, subject, body)
        where = f"SMTP {self.host}:{self.port}"
        try:
            async with asyncio.timeout(self.timeout):
                await aiosmtplib.send(
                    message,
                    hostname=self.host,
                    port=self.port,
                    username=self.username,
                    password=self._password,
                    use_tls=self.tls == "implicit",
                    start_tls={"auto": None, "required": True}.get(self.tls, False),
                    tls_context=self._tls_context,
                    timeout=self.timeout,
                )
        except aiosmtplib.SMTPException as exc:
            raise SMTPSendError(f"{where}: {_describe(exc)}") from exc
        except TimeoutError as exc:
            raise SMTPSendError(f"{where}: no answer within {self.timeout:g} s") from exc
        except ssl.SSLError as exc:
            raise SMTPSendError(f"{where}: TLS failed: {exc}") from exc
        except OSError as exc:
            raise SMTPSendError(f"{where}: {exc}") from exc


def _describe(exc: aiosmtplib.SMTPException) -> str:
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        return "; ".join(_describe(refused) for refused in exc.recipients)
    if isinstance(exc, aiosmtplib.SMTPRecipientRefused):
        return f"recipient {exc.recipient} refused: {exc.code} {exc.message}"
    if isinstance(exc, aiosmtplib.SMTPSenderRefused):
        return f"sender {exc.sender} refused: {exc.code} {exc.message}"
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return f"login refused: {exc.code} {exc.message}"
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return f"{exc.code} {exc.message}"
    cause = exc.__cause__
    if isinstance(exc, aiosmtplib.SMTPConnectError) and isinstance(cause, ssl.SSLError):
        return f"TLS failed: {cause}"
    if isinstance(exc, aiosmtplib.SMTPConnectError) and isinstance(cause, OSError):
        return f"cannot connect: {cause}"
    return exc.message


def _masked(url: str) -> str:
    """The URL with its password replaced by ***, for error messages (even when the URL is malformed)."""
    scheme, sep, rest = url.partition("://")
    authority, mark, query = rest.partition("?")
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.partition(':')[0]}:***@{host}"
    return f"{scheme}{sep}{authority}{mark}{query}"
