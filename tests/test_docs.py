"""The README's configuration table is generated from the settings: it must not drift."""

from pathlib import Path

from ticklock.settings import SETTINGS, markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_configuration_table_matches_the_settings() -> None:
    text = README.read_text()
    assert markdown_table() in text
    for setting in SETTINGS:
        assert setting.env in text
