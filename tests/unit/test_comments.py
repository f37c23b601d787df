"""Comments and docstrings stay true: none names a date, a commit, a file outside the repository or a
benchmark figure. Figures belong in bench/ output, and the design is cited as docs/design.md.

Every Python file outside the tests and benchmarks is read: its comments (``tokenize``) and its docstrings
(``ast``: every bare string statement, so attribute docstrings too). A figure is a number with a unit of
time, size or rate; it is a benchmark figure when it is a microsecond count, a percentile, a rate, a
speed-up, an approximation (``~25 ms``), a cost per fire or call, or stands next to words that say it
was measured (took, costs, saves, CPU, ...). A parameter the code sets ("retries after 0.5 s") is none of
these. A path a comment names must be the tail of a file in the repository; a section it quotes from the
README or docs/design.md must be there.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
README = ROOT / "README.md"

# folders not read: tests, benchmarks (their output is where figures go), environments, build output
SKIPPED_DIRS = {"tests", "tests_parts", "bench", "__pycache__", "node_modules", "build", "dist"}


@dataclass(frozen=True)
class Passage:
    """A comment block or a docstring: its text, and the line of the file its first line is on."""

    path: Path
    line: int
    text: str

    def line_of(self, offset: int) -> int:
        return self.line + self.text.count("\n", 0, offset)


# -- what is read ----------------------------------------------------------------------------------------


def python_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS and "egg-info" not in d)
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py") and f != "conftest.py"]
    return found


def passages(path: Path) -> Iterator[Passage]:
    source = path.read_text()
    # comments: consecutive lines of nothing but a comment make one block; a comment after code is its own
    block: list[str] = []
    start = last = 0
    last_alone = False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        row, column = token.start
        text = token.string.lstrip("#").strip()
        alone = not token.line[:column].strip()
        if alone and block and row == last + 1 and last_alone:
            block.append(text)
        else:
            if block:
                yield Passage(path, start, "\n".join(block))
            block, start = [text], row
        last, last_alone = row, alone
    if block:
        yield Passage(path, start, "\n".join(block))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield Passage(path, node.lineno, node.value.value)


# -- the rules -------------------------------------------------------------------------------------------

MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
DATES = re.compile(
    r"\b(?!1970-01-01)(?:19|20)\d\d[-/.](?:0[1-9]|1[0-2])[-/.](?:0[1-9]|[12]\d|3[01])\b"  # 2026-12-02, not the epoch
    rf"|\b{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"  # Dec 2
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH}\b"  # 2 December
    rf"|\b{MONTH},?\s+(?:19|20)\d\d\b"  # December 2026; case-sensitive: "may 5" is no date
)
DIARY = re.compile(
    r"\b(?:today|yesterday|tonight|this (?:morning|afternoon|evening|week)|last (?:night|week)|on a slow day)\b", re.I
)

# 7 to 40 lower-case hex digits, with a digit and a letter, standing alone (not 0x..., not inside a word)
COMMIT = re.compile(
    r"(?<![\w.\-/:#])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w\-])"
    r"|\bcommit\s+(?:message|log)\b|\bthe commit says\b|\bgit\s+(?:log|blame|history)\b"
    r"|\b(?:see|since|as of)\s+commit\b"
)

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
OUTSIDE = re.compile(
    r"\b(?:DESIGN|NOTES|STYLE)\b|\.\./|\binvariants?\s+(?:#?\d+|[IVX]+)\b|\bdesign\s+doc(?:ument)?\b"
    r"|(?<!docs/)\bdesign\.md\b"
)
EXTENSIONS = r"(?:py|pyi|md|txt|toml|ya?ml|ini|json|sh|cfg|html|js|css|sql|lock)"
PATH = re.compile(rf"(?<![\w./~-])((?:[\w.-]+/)*[\w.-]+\.{EXTENSIONS})(?![\w/-])")
SECTION = re.compile(r"(docs/design\.md|README)(?:'s)?,?\s*(?:section\s+)?[\"“]([^\"”]+)[\"”]")

NUM = r"\d[\d,]*(?:\.\d+)?(?:\s?[-\u2013]\s?\d[\d,]*(?:\.\d+)?)?"  # 15, 1,000, 0.5, 15-20
TIME = r"(?:ns|µs|μs|us|ms|s|secs?|seconds?|mins?|minutes?|hours?)\b"
FIGURE = rf"{NUM}\s?(?:{TIME}|(?:[KMGT]i?B|bytes)\b|%)"
APPROX = r"(?:~|≈|\babout\s|\baround\s|\broughly\s|\bnearly\s|\balmost\s)"
PER = r"(?:of\s+CPU|(?:per|a|an|each)\s+(?:fire|call|job|request|run|batch|write|commit|message|lookup|attempt))\b"
FRACTION = r"\b(?:half|(?:a|one|two|three)\s+(?:third|quarter|fifth|tenth|twentieth|hundredth)s?)\s+of\b"
SHARE = rf"{FRACTION}[^.;]{{0,40}}?\b(?:time|CPU|cost|core|parsing|search)\b"  # a fifth of the parsing
MEASURED = re.compile(
    r"\b(?:measured|measuring|measurement|took|cost|costs|costing|saves?|saved|saving|spent|spends?|faster"
    r"|slower|speed-?ups?|overhead|latency|throughput|benchmark(?:s|ed)?|median|on average|CPU|core"
    r"|this (?:project's )?machine)\b"
)
ALWAYS = re.compile(
    rf"{NUM}\s?(?:µs|μs|us|ns)\b"  # a microsecond count
    r"|\bp(?:50|75|90|95|99|99\.9|999)\b"  # a percentile
    rf"|{NUM}(?:\s+[\w-]+){{0,2}}/s\b|{NUM}(?:\s+[\w-]+){{0,2}}\s+(?:per|a|each)\s+second\b"  # a rate
    rf"|{NUM}\s?[x\u00d7]\s+(?:faster|slower|quicker|cheaper|more|less|fewer)\b"  # a speed-up
    rf"|\b(?:{NUM}|two|three|four|five|ten|twice)\s+times\s+(?:faster|slower|quicker|cheaper|as\s+(?:fast|slow))\b"
    rf"|{NUM}\s?%\s+(?:faster|slower|quicker|cheaper|more|less|fewer)\b"
    rf"|{APPROX}\s?{NUM}\s?{TIME}"  # an approximate time: ~25 ms (a size may restate a constant: ~400 MB)
    rf"|{SHARE}"
    rf"|{FIGURE}\s+{PER}",  # a cost a fire: 13 us of CPU, 2 ms a call
    re.IGNORECASE,
)
NEAR_A_MEASUREMENT = re.compile(rf"{FIGURE}|{FRACTION}", re.IGNORECASE)
NEAR = 60  # characters either side, within its sentence: a parameter may share a sentence with a cost
SENTENCE_END = re.compile(r"(?<=[.;!?])\s+(?=[A-Z(`\"])|\n\s*\n|\n\s*(?:[-*]|\d+\.)\s")


def repository_files() -> tuple[set[str], set[str]]:
    """Every file's path in the repository (outside hidden folders), and every file's name."""
    paths: set[str] = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in {"__pycache__", "node_modules"}]
        paths |= {(Path(folder) / f).relative_to(ROOT).as_posix() for f in files}
    return paths, {p.rsplit("/", 1)[-1] for p in paths}


REPO_PATHS, REPO_NAMES = repository_files()


def in_repository(cited: str) -> bool:
    if "/" not in cited:
        return cited in REPO_NAMES or not cited.endswith(".md")  # a bare name (jobs.yaml) may be an example
    cited = cited.removeprefix("./")
    return any(p == cited or p.endswith("/" + cited) for p in REPO_PATHS)


def sentences(text: str) -> Iterator[tuple[int, str]]:
    start = 0
    for end in SENTENCE_END.finditer(text):
        yield start, text[start : end.start()]
        start = end.end()
    yield start, text[start:]


def problems(text: str) -> Iterator[tuple[int, str, str]]:
    """(offset, rule, words) for each thing in ``text`` a comment must not say."""
    for match in DATES.finditer(text):
        yield match.start(), "a date", match.group()
    for match in DIARY.finditer(text):
        yield match.start(), "a date", match.group()
    for match in COMMIT.finditer(text):
        yield match.start(), "a commit", match.group()
    bare = URL.sub(lambda m: " " * len(m.group()), text)
    for match in OUTSIDE.finditer(bare):
        yield match.start(), "a reference outside the repository", match.group()
    for match in PATH.finditer(bare):
        if not in_repository(match.group(1)):
            yield match.start(), "a file outside the repository", match.group(1)
    for match in SECTION.finditer(bare):
        document = DESIGN if match.group(1).startswith("docs") else README
        if " ".join(match.group(2).rstrip(".,").split()) not in " ".join(document.read_text().split()):
            yield match.start(), f"a section {document.name} does not have", match.group()
    for match in ALWAYS.finditer(text):
        yield match.start(), "a benchmark figure", match.group()
    for start, sentence in sentences(text):
        for match in NEAR_A_MEASUREMENT.finditer(sentence):
            if MEASURED.search(sentence[max(0, match.start() - NEAR) : match.end() + NEAR]):
                yield start + match.start(), "a measured figure", match.group()


def offences() -> list[str]:
    found = []
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        for passage in passages(path):
            seen: set[int] = set()
            for offset, rule, words in problems(passage.text):
                line = passage.line_of(offset)
                if line in seen:
                    continue
                seen.add(line)
                text = passage.text.splitlines()[passage.text.count("\n", 0, offset)].strip()
                found.append(f"{rel}:{line}: {rule} ({words!r}): {text}")
    return found


# -- the tests -------------------------------------------------------------------------------------------


def test_no_comment_or_docstring_names_a_date_a_commit_an_outside_file_or_a_figure() -> None:
    found = offences()
    assert not found, f"{len(found)} comments to rewrite as a reason:\n" + "\n".join(found)


def test_the_design_the_code_cites_is_in_the_repository() -> None:
    assert DESIGN.is_file()
    cites = [p for f in python_files() for p in passages(f) if "docs/design.md" in p.text]
    assert cites, "the code cites docs/design.md for its invariants"


def test_the_files_read_include_the_engine_plugins_and_functions() -> None:
    read = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert "layers/common/ticklock/engine/fire_path.py" in read
    assert "plugins/parts/ticklock_parts/plugin.py" in read
    assert "functions/runner/app.py" in read
    assert not any(r.startswith(("tests/", "bench/")) or "/tests_parts/" in r for r in read)


@pytest.mark.parametrize(
    "text",
    [
        "checked on 2026-12-02, after the refactor",
        "as of Dec 2 the pool is gone",
        "busy for five minutes on a slow day",
        "fixed in 3f9c2e1a, see there",
        "the commit says how",
        "DESIGN.md, invariant 1",
        "as NOTES.md explains",
        "see ../shared/ports.py",
        "the design document says so",
        "(design.md, 'Invariants')",
        '(docs/design.md, "A section that is not there")',
        '(README, "A heading that is not there")',
        "the layout of services/not_in_this_repo.py",
        "each fire took ~2 µs",
        "init costs 13 us of CPU",
        "120 ms p99 under load",
        "it sustains 191 fires/s",
        "at ~300 SQS calls/s",
        "1.35x faster than before",
        "three times faster",
        "2\u00d7 slower than the dict",
        "~25 ms every few seconds",
        "labels() is 1.5 ms a call",
        "a lookup took 0.9-1.1 ms, not 1.9 ms",
        "the loop saves 40 ms",
        "kept the loop busy for 15-20 s, measured",
        "a loop over every character took a fifth of the parsing",
        "building the models was a twentieth of a batch's time",
        "half of the claims' finds cost a new session",
    ],
)
def test_the_rules_refuse(text: str) -> None:
    assert list(problems(text)), text


@pytest.mark.parametrize(
    "text",
    [
        "retries after 0.5 s",
        "``timeout`` (10 s) bounds the whole send",
        "On error a handler is retried after 1 s, then 2, 4, 8, 16, 30, 30 ... seconds",
        "``resolution`` (serve: 20 ms): fires due meanwhile go out together, for one wake-up rather than one per fire",
        "a hung store costs one thread, and a flood of health checks one ping",
        "``resolution`` (serve: 20 ms): the fires due meanwhile go out together, each at most that late, and a"
        " worker runs quick ones as one batch, where handing each over at its instant cost a wake-up per fire",
        "may 5 workers share it",
        "the id is 32 hex digits (0x7f3a9c1d in the example), never deadbeef",
        'the job store (docs/design.md, "Every fire accounted for")',
        'the README\'s "Schedules and time" shows it',
        "see ticklock/engine/fire_path.py and adapters/records.py",
        "``ticklock apply -f jobs.yaml``",
        "Lambda's 6 MB limit on a synchronous request",
        "asyncio reads up to 256 KiB at once",
        "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html",
        "a group commit: creates sent together share their transaction, applied in commit order",
        "sha-256 of the archive",
        "whole seconds counted from 1970-01-01 00:00",
        "at WAL_BOUND pages (~400 MB), should the thread fall behind",
        "waiting for the lock in steps of 0.1-2 ms, up to the busy timeout",
        "the window is measured from a fire's jittered time",
    ],
)
def test_the_rules_let_a_reason_through(text: str) -> None:
    assert not list(problems(text)), list(problems(text))
