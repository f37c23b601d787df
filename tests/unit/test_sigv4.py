"""``ticklock.commands.sigv4`` against AWS's published Signature Version 4 test suite
(``tests/data/aws4_testsuite``: from aws-c-auth's aws-sig-v4-test-suite, as botocore ships it; Apache 2.0,
its LICENSE and NOTICE beside it). Each ``.req`` is read by a parser of this file's own (not an HTTP
library), signed by the ``Signer`` at the suite's instant with its example keys, and the ``Authorization``
header must be the ``.authz`` file's, byte for byte."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from botocore.credentials import Credentials

from ticklock.commands.sigv4 import Signer, SigV4, region_of, to_sign

SUITE = Path(__file__).parents[1] / "data" / "aws4_testsuite"
WHEN = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
# the cases this signer does not take, and why
NOT_OURS = {
    # the token added after signing: for services that do not sign it; API Gateway (and botocore) do
    "post-sts-header-after": "the token is signed, as API Gateway wants it",
    # a request line with a space in its path: not HTTP/1.1 (botocore's own run skips it too)
    "get-space": "not a valid request line",
}


def cases() -> list[Path]:
    found = sorted(p for p in SUITE.rglob("*.req"))
    assert len(found) >= 30, f"the suite is missing: {SUITE}"
    return [p for p in found if p.stem not in NOT_OURS]


def parse(raw: str) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """A .req file: request line, headers (``Name:value``; a line starting with a space continues the
    previous value), a blank line, the body."""
    head, _, body = raw.partition("\n\n")
    lines = head.split("\n")
    method, rest = lines[0].split(" ", 1)
    target = rest.rsplit(" ", 1)[0]
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        if line[:1] in (" ", "\t") and headers:
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line.strip()}")
        else:
            name, _, value = line.partition(":")
            headers.append((name, value))
    return method, target, headers, body.encode()


@pytest.mark.parametrize("req", cases(), ids=lambda p: p.stem)
def test_the_signature_is_the_suites(req: Path) -> None:
    method, target, headers, body = parse(req.read_text())
    host = next(v for k, v in headers if k.lower() == "host")
    # a case with temporary credentials names their token in its canonical request
    token = re.search(r"^x-amz-security-token:(.+)$", req.with_suffix(".creq").read_text(), re.MULTILINE)
    credentials = Credentials(
        "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token.group(1) if token else None
    )
    signer = Signer(credentials, "us-east-1", service="service", now=lambda: WHEN)
    # the suite's requests carry the headers a client sends; duplicates joined as HTTP allows
    merged: dict[str, str] = {}
    for name, value in headers:
        if name.lower() == "x-amz-security-token":
            continue  # the signer adds the credentials' own
        key = name.lower()
        merged[key] = f"{merged[key]},{value.strip()}" if key in merged else value
    # the suite writes the path as it is before encoding (the signer encodes it, as SigV4 says for every
    # service but S3) and the query as the client sends it, percent-encoded (as httpx does a UTF-8 one)
    path, mark, query = target.partition("?")
    sent = path + mark + quote(query, safe="".join(chr(c) for c in range(33, 127)))
    added = signer.sign(method, f"https://{host}{sent}", merged.items(), body)
    assert added["authorization"] == req.with_suffix(".authz").read_text().strip()
    assert added["x-amz-date"] == "20150830T123600Z"


def test_only_the_cases_named_are_left_out() -> None:
    every = {p.stem for p in SUITE.rglob("*.req")}
    assert set(NOT_OURS) <= every and len(every) - len(cases()) == len(NOT_OURS) == 2


def test_an_httpx_request_is_signed_with_what_it_sends() -> None:
    signer = Signer(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), "eu-west-1",
                    now=lambda: WHEN)  # fmt: skip
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    url = "https://abc123.execute-api.eu-west-1.amazonaws.com/jobs"
    with httpx.Client(transport=httpx.MockTransport(gateway), auth=SigV4(signer)) as client:
        client.post(url, params={"q": "a b", "limit": 5}, json={"name": "x"})
    [request] = seen
    again = signer.sign("POST", str(request.url), to_sign(request.headers.multi_items()), request.content)
    assert request.headers["authorization"] == again["authorization"]
    assert "SignedHeaders=content-type;host;x-amz-date," in request.headers["authorization"]
    assert "/eu-west-1/execute-api/aws4_request" in request.headers["authorization"]
    assert region_of(url) == "eu-west-1" and region_of("http://127.0.0.1:8000") is None


def test_the_query_is_sent_in_canonical_form_and_a_gateway_of_its_own_accepts_it() -> None:
    from tests.support.gateway import verify

    secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    now = datetime.now(UTC)
    signer = Signer(Credentials("AKIDEXAMPLE", secret), "eu-west-1", now=lambda: now)
    seen: list[httpx.Request] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(gateway), auth=SigV4(signer)) as client:
        client.get("https://abc.execute-api.eu-west-1.amazonaws.com/Prod/jobs?q=a+b*&sort=-name&x=%7E~")
        client.post("https://abc.execute-api.eu-west-1.amazonaws.com/Prod/jobs", json={"name": "ü"})
    get, post = seen
    assert get.url.query.decode() == "q=a%20b%2A&sort=-name&x=~~"  # '+' is a space; '*' encoded
    for request in seen:
        headers = {k.lower(): v for k, v in request.headers.items()}
        target = request.url.raw_path.decode()
        problem = verify(request.method, target, headers, request.content, key="AKIDEXAMPLE", secret=secret,
                         region="eu-west-1", now=now)  # fmt: skip
        assert problem is None, (request.url, problem)
    tampered = {k.lower(): v for k, v in post.headers.items()}
    problem = verify("POST", post.url.raw_path.decode(), tampered, b'{"name":"x"}', key="AKIDEXAMPLE",
                     secret=secret, region="eu-west-1", now=now)  # fmt: skip
    assert problem == "the signature does not match"
