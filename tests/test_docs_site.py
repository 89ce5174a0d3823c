"""The documentation site builds strictly, its CLI page covers the parser, and no doc names a
file that is not in the repository (issue 26).

``mkdocs build --strict`` fails on a broken link or anchor, a nav entry without its page, a page
left out of the nav, and a docstring the API reference cannot render. The scan below fails on
a path such as ``tests/foo.py`` or ``seglog/bar.py`` in docs/*.md or README.md that does not
exist, and on the names of the notes kept outside the repository.
"""

from __future__ import annotations

import argparse
import glob
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seglog.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The pages scanned for names of files.
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
#: Top-level directories of the repository a doc may name paths in (and ``shared/``, outside
#: it: any path there is stale).
PATH_ROOTS = ("docs", "src", "tests", "bench", "ci", "tools", "fuzz", "shared")
#: Notes that lived outside the repository: a doc names what they said, never them.
OUTSIDE_NOTES = ("real-kafka.md", "kafka-format.md", "peers.md", "DESIGN.md",
                 "reference/replication.md", "shared/")

_PATH = re.compile(r"(?<![\w./<>-])((?:%s)/[\w.*/<>{}-]*[\w*])" % "|".join(PATH_ROOTS))
# ``seglog/store.py``: a module named relative to src/.
_MODULE_PATH = re.compile(r"(?<![\w./-])(seglog/[\w/]+\.(?:py|pyx|pyi))\b")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    ran = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, (
        "mkdocs build --strict failed (pip install -e '.[docs]' if mkdocs is missing):\n"
        + ran.stdout + ran.stderr)
    return out


def test_strict_build_makes_every_page(site: Path) -> None:
    for page in DOCS.glob("*.md"):
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.exists(), f"{page.name} was not built"


def _command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                   ) -> list[tuple[str, ...]]:
    # Walked here, not through the hook, so that a hook that leaves a command out fails.
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            visible = {a.dest for a in action._choices_actions if a.help != argparse.SUPPRESS}
            for name, sub in action.choices.items():
                if name in visible:
                    found.append(path + (name,))
                    found += _command_paths(sub, path + (name,))
    return found


def test_cli_page_has_every_command(site: Path) -> None:
    page = html.unescape((site / "cli" / "index.html").read_text(encoding="utf-8"))
    paths = _command_paths(build_parser())
    assert ("serve",) in paths and len(paths) >= 8
    for path in paths:
        anchor = "seglog-" + "-".join(path)
        assert f'id="{anchor}"' in page, f"docs/cli.md has no section for seglog {' '.join(path)}"
        assert f"usage: seglog {' '.join(path)}" in page, f"no usage of seglog {' '.join(path)}"


def test_cli_page_shows_options_and_examples(site: Path) -> None:
    page = html.unescape((site / "cli" / "index.html").read_text(encoding="utf-8"))
    parser = build_parser()
    serve = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
                 ).choices["serve"]
    for action in serve._actions:
        if action.help != argparse.SUPPRESS:
            for option in action.option_strings:
                assert option in page, option
    for path in _command_paths(parser):
        sub = parser
        for name in path:
            sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)
                       ).choices[name]
        if sub.epilog:
            example = sub.epilog.strip().splitlines()[-1].strip()
            assert example in page, f"the example of seglog {' '.join(path)} is missing"


def _referenced_paths(text: str) -> list[str]:
    return _PATH.findall(text)


def _exists(path: str) -> bool:
    path = path.rstrip(".")
    if "<" in path or "{" in path:
        # A pattern (``tests/server/test_acl_<api>.py``): its fixed directory must exist.
        path = path[:path.index("<" if "<" in path else "{")].rsplit("/", 1)[0]
    if "*" in path:
        return bool(glob.glob(str(ROOT / path)))
    return (ROOT / path).exists()


def test_no_doc_names_a_missing_file() -> None:
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for path in _referenced_paths(text):
            if not _exists(path):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        for path in _MODULE_PATH.findall(text):
            if not (ROOT / "src" / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        for note in OUTSIDE_NOTES:
            if note in text:
                missing.append(f"{page.relative_to(ROOT)}: names {note}, which is not in the "
                               "repository")
    assert not missing, "docs name files that are not in the repository:\n" + "\n".join(missing)


def test_the_scan_finds_missing_files() -> None:
    # The scan itself: a path that exists passes, one that does not is found.
    assert _referenced_paths("see `tests/test_docs_site.py` and docs/nope.md.") == [
        "tests/test_docs_site.py", "docs/nope.md"]
    assert _exists("tests/test_docs_site.py") and not _exists("docs/nope.md")
    assert _exists("tests/server/test_acl_*")
    assert _referenced_paths("../shared/x.md") == []  # relative: OUTSIDE_NOTES has "shared/"
    assert _referenced_paths("`shared/reference/replication.md`") == [
        "shared/reference/replication.md"]
    assert not _exists("shared/reference/replication.md")
