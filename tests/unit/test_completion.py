"""``ticklock completion bash``, run in a real bash: it completes commands, actions and their options."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ticklock.cli import _parser
from ticklock.commands import completion
from ticklock.settings import every_setting

SCRIPT = completion.bash(_parser(every_setting(())))


def complete(*words: str) -> list[str]:
    line = " ".join(f"'{w}'" for w in ("ticklock", *words))
    program = f'{SCRIPT}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _ticklock; printf "%s\\n" "${{COMPREPLY[@]}}"'
    bash = shutil.which("bash")
    assert bash is not None
    answer = subprocess.run([bash, "-c", program], capture_output=True, text=True, timeout=10, check=True)
    return [w for w in answer.stdout.splitlines() if w]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("j",), ["jobs"]),
        (("jobs", "p"), ["pause"]),
        (("jobs", "pause", "nightly", "--n"), ["--note"]),
        (("jobs", "backfill", "x", "--d"), ["--dry-run"]),
        (("apply", "--p"), ["--profile", "--plan", "--prune"]),  # --profile: the SigV4 signing options
        (("ui", "--s"), ["--sigv4"]),
        (("serve", "--db"), ["--db"]),
    ],
)
def test_the_script_completes_what_the_parser_has(words: tuple[str, ...], expected: list[str]) -> None:
    assert complete(*words) == expected


def test_the_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n"], input=SCRIPT, text=True, timeout=10).returncode == 0
