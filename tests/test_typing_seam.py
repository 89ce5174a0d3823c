"""``mypy --strict`` on the partition seam every handler talks to (issue 22): the seam, the
lone broker's implementation and the placement rules. The list grows as server/ and cluster/
become strict (issue 22's goal: both packages strict, zero errors).

Skipped only when mypy is not installed; CI installs the ``test`` extra (which has mypy).
``--follow-imports=silent``: the files named are checked in full, the modules they import are
read for their types only.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import seglog

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[test]')")

SRC = Path(seglog.__file__).resolve().parent
STRICT = ["cluster/seam.py", "cluster/single.py", "cluster/placement.py",
          "cluster/config_changes.py"]


def test_the_seam_is_strictly_typed():
    paths = [str(SRC / name) for name in STRICT]
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--no-incremental", *paths],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
