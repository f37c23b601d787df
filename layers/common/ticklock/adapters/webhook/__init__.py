"""The ``WebhookSender`` port's adapter (``ticklock.ports``): signed JSON over HTTP(S)."""

from __future__ import annotations

from typing import Any

from ticklock.adapters.webhook.http import HttpWebhook
from ticklock.ports import WebhookSender

__all__ = ["HttpWebhook", "webhook_from"]


def webhook_from(settings: Any) -> WebhookSender:
    """The sender ``settings.webhook_secret`` and ``settings.webhook_timeout`` configure."""
    return HttpWebhook(secret=settings.webhook_secret, timeout=settings.webhook_timeout)
