"""The ``EmailSender`` port's adapters (``ticklock.ports``): SMTP and Amazon SES."""

from __future__ import annotations

from typing import Any

from ticklock.ports import EmailSender


def sender_from(settings: Any) -> EmailSender | None:
    """The sender ``settings.email`` names: ``ses``, an ``smtp://`` / ``smtps://`` URL, or none (empty),
    from ``settings.email_from``. Raises ``ValueError`` for a URL it cannot use."""
    if settings.email == "ses":
        from ticklock.adapters.email.ses import SESSender

        return SESSender(settings.email_from)
    if settings.email:
        from ticklock.adapters.email.smtp import SMTPSender

        return SMTPSender.from_url(settings.email, settings.email_from)
    return None
