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


def test_test_module_basenames_are_unique() -> None:
    by_name: dict[str, list[str]] = collections.defaultdict(list)
    for path in TESTS_DIR.rglob("*.py"):
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            by_name[path.name].append(str(path.relative_to(TESTS_DIR)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a basename: {clashes}"


def test_the_check_sees_a_clash(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for sub in ("a", "b"):
        (tmp_path / sub / "test_same.py").write_text("")
    names = [p.name for p in tmp_path.rglob("test_*.py")]
    assert len(names) != len(set(names))
