"""What the franz-go tests share (tests/kafka/share/test_share_franz_go.py,
tests/kafka/test_franz_go_clusters.py): ``tools/franz_go.py`` loaded as a module, and the skip
of a test whose ``franz_go`` marker was not asked for or whose Go is missing."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_tool() -> ModuleType:
    """``tools/franz_go.py`` (not a package module: loaded from its path)."""
    spec = importlib.util.spec_from_file_location("franz_go", ROOT / "tools" / "franz_go.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def skip_unless_selected(request: pytest.FixtureRequest, what: str) -> None:
    """Skip unless ``-m`` names ``franz_go`` (``what`` takes minutes) and ``go`` is here."""
    if "franz_go" not in (request.config.option.markexpr or ""):
        pytest.skip(f"{what} takes minutes: run it with -m franz_go")
    if shutil.which("go") is None:
        pytest.skip("needs go")
