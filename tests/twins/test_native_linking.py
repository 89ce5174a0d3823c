"""How the native modules link to each other: by ``cimport`` through ``.pxd`` files, never
through hand-made PyCapsule function tables (issue 9).

Each ``src/_native/<name>.pyx`` is built as ``seglog._native.<name>`` and Cython finds a
module's .pxd by its qualified name, so the .pxd lives at ``src/seglog/_native/<name>.pxd``.
The source checks need no build; the run-time checks skip without the native backend.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE_SOURCES = ROOT / "src" / "_native"
NATIVE_PACKAGE = ROOT / "src" / "seglog" / "_native"
MODULE_NAMES = sorted(path.stem for path in NATIVE_SOURCES.glob("*.pyx"))


def _sources() -> list[Path]:
    """Every hand-written native source and the build script (not Cython's generated .c)."""
    paths = [*NATIVE_SOURCES.glob("*.pyx"), *NATIVE_SOURCES.glob("*.pxd"),
             *NATIVE_SOURCES.glob("*.h"), *NATIVE_PACKAGE.glob("*.pxd"), ROOT / "setup.py"]
    return sorted(paths)


def test_there_are_native_modules():
    assert {"_crc32c", "codec", "index", "keymap", "segment"} <= set(MODULE_NAMES)


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_every_native_module_has_its_pxd_beside_the_built_module(name):
    assert (NATIVE_PACKAGE / f"{name}.pxd").is_file(), (
        f"src/_native/{name}.pyx has no src/seglog/_native/{name}.pxd")


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_no_module_pxd_is_left_in_the_source_directory(name):
    # Two .pxd files for one module: which one Cython reads would depend on the include path.
    assert not (NATIVE_SOURCES / f"{name}.pxd").exists()


def test_no_source_mentions_pycapsule():
    offenders = [str(path.relative_to(ROOT)) for path in _sources()
                 if re.search(r"pycapsule", path.read_text(), re.IGNORECASE)]
    assert offenders == []


def test_no_source_cimports_a_module_by_its_bare_name():
    # ``from codec cimport ...`` would find no .pxd (or a stale one) for a module built as
    # seglog._native.codec; header-only helpers (no .pyx) are the only bare cimports allowed.
    bare = re.compile(r"^\s*(?:from\s+(\w+)\s+cimport|cimport\s+(\w+))", re.MULTILINE)
    offenders = []
    for path in _sources():
        for match in bare.finditer(path.read_text()):
            name = match.group(1) or match.group(2)
            if name in MODULE_NAMES:
                offenders.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert offenders == []


def test_segment_cimports_the_codec_and_index_functions():
    text = (NATIVE_SOURCES / "segment.pyx").read_text()
    assert "from seglog._native.codec cimport batch_record_at" in text
    assert "from seglog._native.index cimport offset_lookup" in text


@pytest.mark.parametrize("name, exported", [
    ("codec", {"batch_record_at"}),
    ("index", {"offset_lookup"}),
])
def test_cdef_functions_are_exported_through_cythons_own_table(name, exported):
    module = pytest.importorskip(f"seglog._native.{name}", reason="native backend not built")
    assert set(module.__pyx_capi__) == exported


def test_no_native_module_holds_a_capsule_attribute():
    for name in MODULE_NAMES:
        try:
            module = importlib.import_module(f"seglog._native.{name}")
        except ImportError:
            pytest.skip("native backend not built")
        capsules = [attribute for attribute in dir(module)
                    if attribute != "__pyx_capi__"
                    and type(getattr(module, attribute)).__name__ == "PyCapsule"]
        assert capsules == [], name
