"""The engine's SMTP server fixture, for the scanner's email."""

from tests.integration.test_email import smtp_server  # noqa: F401 - the fixture, shared
