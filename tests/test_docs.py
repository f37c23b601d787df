"""The README does not drift: its configuration table is generated from the settings, and its example
plug-in is the one the tests install."""

from pathlib import Path

from ticklock.settings import SETTINGS, markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_configuration_table_matches_the_settings() -> None:
    text = README.read_text()
    assert markdown_table() in text
    for setting in SETTINGS:
        assert setting.env in text


def test_readme_shows_the_example_plugin_as_it_is() -> None:
    example = README.parents[0] / "plugins" / "hello" / "ticklock_hello" / "__init__.py"
    assert f"```python\n# plugins/hello/ticklock_hello/__init__.py\n{example.read_text()}```" in README.read_text()
