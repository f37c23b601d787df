"""HTTP as plain values: a ``Request`` in, a ``Reply`` out, and the strict JSON reader.

Nothing here knows ASGI or API Gateway; ``asgi.py`` and ``gateway.py`` translate to and from these, so
the same routes, checks and error bodies serve ``ticklock serve`` and the API function.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from itertools import accumulate
from typing import Any

JSON = "application/json"
MAX_JSON_DEPTH = 64  # the payload's own limit (32) plus the job around it, with room to say which is wrong
MAX_INT_DIGITS = 100  # a payload integer is at most 64 bits; anything longer is refused while parsing


@dataclass(frozen=True)
class Request:
    """One request. ``headers`` are keyed in lower case; ``query`` keeps every value of a repeated key."""

    method: str
    path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, list[str]] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class Reply:
    """One response: status, headers (without Content-Length: each transport adds its own) and bytes."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def json(status: int, data: Any, headers: Mapping[str, str] | None = None) -> Reply:
        text = data if isinstance(data, bytes) else json.dumps(data, ensure_ascii=False).encode()
        return Reply(status, text, {"content-type": JSON, **(headers or {})})


def error(
    status: HTTPStatus | int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """The one error body: ``{"error", "message", "details"}``."""
    return Reply.json(int(status), {"error": code, "message": message, "details": details or []}, headers)


class BadJson(ValueError):
    """The body is not JSON this API reads; the message says where and why."""


def read_json(body: bytes) -> Any:
    """Decode ``body`` as strict UTF-8 JSON (RFC 8259): no NaN or Infinity, no duplicate keys, numbers
    that fit, nesting at most ``MAX_JSON_DEPTH`` deep. Raises ``BadJson`` naming the problem."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadJson(f"the body is not UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start}") from None
    depth = _depth(body)
    if depth > MAX_JSON_DEPTH:
        raise BadJson(f"the body is nested {depth} levels deep; at most {MAX_JSON_DEPTH} are read")
    try:
        return json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_int=_int, parse_float=_float
        )
    except BadJson:
        raise
    except json.JSONDecodeError as exc:
        raise BadJson(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise BadJson(f"the body is not valid JSON: {exc}") from None


def _depth(body: bytes) -> int:
    """The deepest nesting of ``[`` / ``{`` outside strings; counted before parsing, so a body nested
    ten thousand deep costs one scan instead of a recursion error deep inside the parser.

    On the bytes (a string's escapes, brackets and quotes are all ASCII, which no byte of a multi-byte
    character is), without a loop over each: a body without a backslash keeps only its brackets and
    quotes, and its strings are the quotes in pairs; with one, each string is cut out by a pattern that
    knows escapes (an unterminated string runs to the end). A Python loop over every character would cost
    more than the parse of a large batch it guards."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the limit: skip the scan
    if b"\\" in body:
        brackets = _STRING.sub(b"", body).translate(None, _ALL_BUT_BRACKETS)
    else:
        shape = body.translate(None, _ALL_BUT_BRACKETS_AND_QUOTES)
        brackets = shape.replace(b'""', b"")  # the strings without a bracket: a quote, and the next
        if b'"' in brackets:  # some string holds a bracket
            brackets = _QUOTED.sub(b"", shape)
    return max(accumulate((1 if byte in b"[{" else -1 for byte in brackets), initial=0))


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_QUOTED = re.compile(rb'"[^"]*"?')
_ALL_BUT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_ALL_BUT_BRACKETS_AND_QUOTES = bytes(byte for byte in range(256) if byte not in b'[]{}"')


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadJson(f"the body has the key {key[:100]!r} twice in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise BadJson(f"the body is not valid JSON: {name} is not a JSON number")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BadJson(f"the body has an integer of {len(text.lstrip('-'))} digits; at most {MAX_INT_DIGITS} are read")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJson(f"the body has the number {text[:40]} that does not fit a 64-bit float")
    return value
