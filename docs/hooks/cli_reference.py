"""mkdocs hook: the command-line reference (docs/cli.md), generated from the ``seglog`` parsers.

``cli.md`` holds a short introduction and the marker ``<!-- cli-reference -->``; at build
time this hook replaces the marker with one section per command and sub-command of
:func:`seglog.cli.build_parser`, each with its ``--help`` text (usage, options and the
epilog's examples). A command added to the parser appears on the page without an edit here.

Importable without mkdocs: :func:`cli_reference_markdown` and :func:`command_paths` are what
``tests/test_docs_site.py`` checks the built page against.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Iterator

#: Where the generated sections go in docs/cli.md.
MARKER = "<!-- cli-reference -->"
#: Width of the help text on the page (argparse reads $COLUMNS): fixed, so the page does not
#: depend on the terminal that builds it.
HELP_COLUMNS = 96

_SRC = Path(__file__).resolve().parents[2] / "src"


def _build_parser() -> argparse.ArgumentParser:
    # The site is built from a checkout: its own src/ first, whatever else is installed.
    if str(_SRC) not in sys.path:
        sys.path.insert(0, str(_SRC))
    from seglog.cli import build_parser

    return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each visible sub-command of ``parser``, in order."""
    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in helps and helps[name] != argparse.SUPPRESS:
                    yield name, helps[name] or "", sub


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[
        tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    for name, help_text, sub in _subcommands(parser):
        yield path + (name,), help_text, sub
        yield from _walk(sub, path + (name,))


def command_paths(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, ...]]:
    """Every command and sub-command, e.g. ``("topics", "create")``, in ``--help`` order."""
    return [path for path, _help, _sub in _walk(parser or _build_parser(), ())]


def _help_text(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def _fence(text: str) -> str:
    # A help text never holds four backticks; a longer fence would do if one ever did.
    return "````text\n" + text + "\n````"


def cli_reference_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The generated part of docs/cli.md: an index of the commands, then one section each."""
    parser = parser or _build_parser()
    entries = list(_walk(parser, ()))
    lines = ["## Commands", ""]
    for path, help_text, _sub in entries:
        anchor = "seglog-" + "-".join(path)
        indent = "    " * (len(path) - 1)
        lines.append(f"{indent}- [`seglog {' '.join(path)}`](#{anchor}): {help_text}")
    lines += ["", "## seglog", "", _fence(_help_text(parser)), ""]
    for path, _help, sub in entries:
        anchor = "seglog-" + "-".join(path)
        level = "#" * min(2 + len(path) - 1, 4)
        lines += [f"{level} seglog {' '.join(path)} {{#{anchor}}}", "", _fence(_help_text(sub)), ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: fill the marker of docs/cli.md."""
    if page.file.src_uri != "cli.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/cli.md lost its marker {MARKER}")
    return markdown.replace(MARKER, cli_reference_markdown())
