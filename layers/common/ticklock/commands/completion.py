"""``ticklock completion bash``: a bash completion script written from the command's own parser, so it
always offers the commands and options there are (``source <(ticklock completion bash)``)."""

from __future__ import annotations

import argparse


def _tree(parser: argparse.ArgumentParser, path: tuple[str, ...], out: dict[tuple[str, ...], list[str]]) -> None:
    words: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                _tree(sub, (*path, name), out)
        else:
            words += [o for o in action.option_strings if o.startswith("--")]
    out[path] = words


def bash(parser: argparse.ArgumentParser) -> str:
    tree: dict[tuple[str, ...], list[str]] = {}
    _tree(parser, (), tree)
    cases = []
    for path in sorted(tree, key=len, reverse=True):  # the longest command path that matches wins
        pattern = '""' if not path else f'"{" ".join(path)}"|"{" ".join(path)} "*'
        cases.append(f"    {pattern}) opts={' '.join(tree[path])!r} ;;")
    body = "\n".join(cases)
    return f"""# bash completion for ticklock: source <(ticklock completion bash)
_ticklock() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" word path="" opts=""
  for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
    [[ $word == -* ]] || path="${{path:+$path }}$word"
  done
  case "$path" in
{body}
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -F _ticklock ticklock
"""
