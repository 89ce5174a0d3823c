"""``mypy --strict`` on the twin contract and the native stubs, and both backends against it.

Skipped only when mypy is not installed; CI installs the ``test`` extra (which has mypy), so
it runs there. ``--follow-imports=silent``: the files named are checked in full; modules they
import (``seglog.errors``, ``seglog.results``, ...) are read for their types but their own
strictness is not this test's subject.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import seglog

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[test]')")

SRC = Path(seglog.__file__).resolve().parent.parent
STUBS = sorted(str(p.relative_to(SRC.parent)) for p in (SRC / "seglog" / "_native").glob("*.pyi"))

#: Each class of a backend is what the contract says, and the backend package is a Backend:
#: the native one through its stubs, the pure one through its (partly annotated) source, so
#: for it mypy checks the names and parameters. Compile-time only: nothing runs.
CONFORMANCE = """\
import seglog.{package}
from seglog import _contract
from seglog.{package} import accumulator, codec, index, keymap, segment, wire


def record(x: codec.Record) -> _contract.Record:
    return x


def batch(x: codec.Batch) -> _contract.Batch:
    return x


def columns(x: codec.Columns) -> _contract.Columns:
    return x


def offset_index(x: index.OffsetIndex) -> _contract.OffsetIndex:
    return x


def time_index(x: index.TimeIndex) -> _contract.TimeIndex:
    return x


def key_map(x: keymap.KeyMap) -> _contract.KeyMap:
    return x


def segment_(x: segment.Segment) -> _contract.Segment:
    return x


def record_buffer(x: accumulator.RecordBuffer) -> _contract.RecordBuffer:
    return x


backend: _contract.Backend = seglog.{package}
keymap_module: _contract.KeyMapModule = keymap
accumulator_module: _contract.AccumulatorModule = accumulator
wire_module: _contract.WireModule = wire
"""


def _mypy(tmp_path: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MYPYPATH=str(SRC))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary", *paths],
        cwd=SRC.parent, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_contract_and_stubs_pass_mypy_strict(tmp_path):
    assert len(STUBS) == 7, STUBS
    result = _mypy(tmp_path, "src/seglog/_contract.py", *STUBS)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("package", ["_native", "pure"])
def test_backends_satisfy_the_contract(tmp_path, package):
    snippet = tmp_path / "conformance.py"
    snippet.write_text(CONFORMANCE.format(package=package))
    result = _mypy(tmp_path, str(snippet))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_sees_a_broken_stub(tmp_path):
    """The conformance check can fail: a stub whose Segment.read returns bytes, not a
    memoryview, does not satisfy the contract."""
    stubs = tmp_path / "stubs" / "seglog" / "_native"
    stubs.mkdir(parents=True)
    original = (SRC / "seglog" / "_native" / "segment.pyi").read_text()
    broken = original.replace("min_one_batch: bool = True) -> memoryview: ...",
                              "min_one_batch: bool = True) -> bytes: ...")
    assert broken != original
    (stubs / "segment.pyi").write_text(broken)
    snippet = tmp_path / "conformance.py"
    snippet.write_text("from seglog import _contract\nfrom seglog._native import segment\n\n\n"
                       "def segment_(x: segment.Segment) -> _contract.Segment:\n    return x\n")
    env = dict(os.environ, MYPYPATH=str(SRC))
    # A stub package of its own ahead of src: seglog._native.segment comes from the copy.
    (tmp_path / "stubs" / "seglog" / "__init__.pyi").write_text("")
    (stubs / "__init__.pyi").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy_cache"), str(snippet)],
        cwd=tmp_path, env=dict(env, MYPYPATH=f"{tmp_path / 'stubs'}{os.pathsep}{SRC}"),
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "def read(" in result.stdout and "-> bytes" in result.stdout
