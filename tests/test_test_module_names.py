"""Every test module under ``tests/`` has a basename of its own.

The test directories are not packages (no ``__init__.py``), so pytest imports each test module
by its basename; a second module of the same name anywhere under ``tests/`` stops the whole
collection ("import file mismatch"), which a run of one directory does not show. This test
shows it in any run.
"""

from __future__ import annotations

import collections
import pathlib

TESTS_DIR = pathlib.Path(__file__).resolve().parent


def basename_clashes(root: pathlib.Path) -> dict[str, list[str]]:
    """``{basename: [relative paths]}`` of the test modules under ``root`` sharing a name."""
    by_name: dict[str, list[str]] = collections.defaultdict(list)
    for path in root.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(root)))
    return {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}


def test_test_module_basenames_are_unique() -> None:
    assert basename_clashes(TESTS_DIR) == {}


def test_the_check_sees_a_clash(tmp_path: pathlib.Path) -> None:
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "test_same.py").write_text("")
    (tmp_path / "a" / "test_other.py").write_text("")
    assert basename_clashes(tmp_path) == {"test_same.py": ["a/test_same.py", "b/test_same.py"]}
