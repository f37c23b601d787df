"""The field types the models share: strict objects, whole numbers, names, instants, payloads."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StrictInt

STRICT = ConfigDict(extra="forbid")  # a field the model does not declare is refused, not dropped


def _whole(value: Any) -> Any:
    # JSON Schema counts 5.0 as an integer; true and "5" are not numbers at all
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[StrictInt, BeforeValidator(_whole)]


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$"


def _name_text(value: str) -> str:
    # said in words: pydantic's own message quotes the regular expression
    if not re.match(NAME_PATTERN, value):
        raise ValueError("must start with a letter or a digit, then only letters, digits and _ . : @ / -")
    return value


Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="unique; letters, digits and _ . : @ / -",
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
    AfterValidator(_name_text),
]


def parse_instant(text: str) -> datetime:
    """An RFC 3339 date-time with an offset; a number, a date alone or a local time is refused."""
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"{text[:64]!r} is not an RFC 3339 date-time with an offset, such as 2026-12-24T18:00:00Z")
    try:
        return datetime.fromisoformat(text.upper()).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text[:64]!r} is out of range once in UTC") from None
    except ValueError as exc:
        raise ValueError(f"{text[:64]!r} is not a valid date-time: {exc}") from None


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def _instant_text(value: str) -> str:
    parse_instant(value)  # raises with the reason
    return value


# kept as the text given (routes parse it with ``parse_instant``), checked on the way in
InstantText = Annotated[str, AfterValidator(_instant_text)]
Instant = Annotated[
    InstantText | None,
    Field(max_length=64, json_schema_extra={"format": "date-time"}),
]


Payload = Annotated[dict[str, Any], Field(description="a JSON object handed to the handler")]
