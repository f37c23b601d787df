"""`ticklock serve` as the engine's end-to-end tests start it (``tests/e2e``), here with the plug-in installed."""

from tests.e2e.conftest import start  # noqa: F401 - the fixture, shared
