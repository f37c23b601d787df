"""The ``EmailSender`` port on Amazon SES: API v2 ``SendEmail`` with simple content, plain text in UTF-8.

v2 rather than the classic API: it is the one AWS maintains, and moto server implements its ``SendEmail``
on the same backend as v1's (identity verification, the recorded messages, ``MessageRejected`` for an
unverified sender), so the tests run this exact call. SES writes the Date and Message-ID headers itself.

boto3 blocks, so each send runs in a worker thread (``asyncio.to_thread``); the client is made once and
shared by those threads (boto3 clients are thread-safe), its pool sized for the scanner's ten sends in
flight. The endpoint follows ``AWS_ENDPOINT_URL`` (LocalStack, moto), as boto3 does. A refusal
(``ClientError``) or a transport failure (``BotoCoreError``: no route, timeout, no credentials) raises
``SESSendError`` with SES's error code. A send cancelled by the caller still finishes in its thread, so
the next run may send it again: delivery is at least once.
"""

from __future__ import annotations

import asyncio
import os
from email.utils import parseaddr
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ticklock.errors import EmailUnavailable

SESSendError = EmailUnavailable  # its former name, kept for one release


def ses_client(endpoint_url: str | None = None) -> Any:
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(
        connect_timeout=2,
        read_timeout=10,
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=10,
    )
    return boto3.client("sesv2", region_name=region, endpoint_url=endpoint_url, config=config)


class SESSender:
    """The ``EmailSender`` port on Amazon SES (v2); ``from_address`` must be a verified identity."""

    def __init__(self, from_address: str, *, client: Any = None) -> None:
        if "@" not in parseaddr(from_address)[1]:
            raise ValueError(f"from_address {from_address!r} is not an email address")
        self.from_address = from_address
        self._client = client or ses_client()

    async def send(self, to: str, subject: str, body: str) -> None:
        request = {
            "FromEmailAddress": self.from_address,
            "Destination": {"ToAddresses": [to]},
            "Content": {
                "Simple": {
                    # a line break would end the Subject header: subjects are one line
                    "Subject": {"Data": " ".join(subject.splitlines()), "Charset": "UTF-8"},
                    "Body": {"Text": {"Data": body, "Charset": "UTF-8"}},
                }
            },
        }
        try:
            await asyncio.to_thread(self._client.send_email, **request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "Unknown"), error.get("Message") or str(exc)
            raise SESSendError(f"SES {code}: {message} (from {self.from_address} to {to})") from exc
        except BotoCoreError as exc:
            raise SESSendError(f"SES: {exc}") from exc
