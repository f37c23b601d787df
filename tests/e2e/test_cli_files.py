"""``ticklock apply -f FILE`` with a file that cannot be read: one line naming the file (and the line and
column where the parser gives them), exit 2, no traceback. The file is read before any API is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import run_cli

pytestmark = pytest.mark.e2e
NOWHERE = ["--api", "http://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("b.yaml", b"jobs:\n  - name: [unclosed\n", ":3:1: not valid YAML"),
        ("tab.yaml", b"jobs:\n\t- name: x\n", ":2:1: not valid YAML"),
        ("control.yaml", b"jobs: \x01\n", ": not valid YAML"),
        ("latin1.yaml", b"jobs:\n  - name: caf\xe9\n", ": not UTF-8"),
        ("b.json", b'{"jobs": [\n  {"name": "x",}\n]}\n', ":2:16: not valid JSON"),
    ],
)
def test_a_file_that_cannot_be_parsed_is_one_line_and_exit_2(
    tmp_path: Path, name: str, content: bytes, where: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    answered = run_cli("apply", "-f", str(path), "--plan", *NOWHERE)
    assert answered.returncode == 2, answered.stderr
    assert answered.stderr.strip() == answered.stderr.strip().splitlines()[0], answered.stderr
    assert f"{path}{where}" in answered.stderr


@pytest.mark.parametrize(("make", "said"), [(False, "no such file"), (True, "a directory, not a jobs file")])
def test_a_missing_file_or_a_directory_is_one_line_and_exit_2(tmp_path: Path, make: bool, said: str) -> None:
    path = tmp_path / "jobs.yaml"
    if make:
        path.mkdir()
    answered = run_cli("apply", "-f", str(path), "--plan", *NOWHERE)
    assert answered.returncode == 2, answered.stderr
    assert answered.stderr.strip() == f"ticklock: error: {path}: {said}"
