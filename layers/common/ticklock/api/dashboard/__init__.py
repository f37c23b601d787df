"""The dashboard: three static files (``index.html``, ``app.js``, ``app.css``) that ship in the package and
read and act through the REST API of the origin that serves them. Nothing is vendored and nothing is built
at install time: plain JavaScript, no library, no external request (the CSP below forbids any).

``ticklock serve`` serves them at ``/ui`` (``/`` redirects there); the API function on AWS does not (an
operator runs ``ticklock ui --api URL`` on their machine instead, which serves the same files and signs
the API calls it passes on). The files are open, as ``/health`` is: the page asks for the token itself.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

from ticklock.api.http import Reply
from ticklock.api.routes import Call, Route

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# the page loads only its own files and talks only to its own origin; no frames, no inline script
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def assets() -> dict[str, tuple[bytes, str]]:
    """The files by the path they are served at, with their content type."""
    folder = resources.files(__name__)
    found = {}
    for name in ("index.html", "app.js", "app.css"):
        found[f"/ui/{name}"] = (folder.joinpath(name).read_bytes(), TYPES[name[name.rindex(".") :]])
    return found


def routes() -> list[Route]:
    """``/`` and ``/ui`` (the page), and each file under ``/ui/``: open GETs, outside the OpenAPI document."""
    files = assets()
    page = files["/ui/index.html"]

    def serve(body: bytes, kind: str) -> Callable[[Call], Reply]:
        return lambda call: Reply(200, body, {"content-type": kind, **HEADERS})

    found = [
        Route("GET", "/", lambda c: Reply(302, b"", {"location": "/ui/"}), "root", "", store=False, open=True,
              in_schema=False),
        Route("GET", "/ui", lambda c: Reply(302, b"", {"location": "/ui/"}), "ui", "", store=False, open=True,
              in_schema=False),
        Route("GET", "/ui/", serve(*page), "uiPage", "", store=False, open=True, in_schema=False),
    ]  # fmt: skip
    for path, (body, kind) in files.items():
        found.append(Route("GET", path, serve(body, kind), f"ui:{path}", "", store=False, open=True, in_schema=False))
    return found
