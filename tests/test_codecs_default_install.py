"""Every codec Kafka accepts is on a default install (issue 24): snappy and zstd are not
extras, so a Produce compressed with them is never refused for a missing package. The
produce-and-read-back runs with real clients are in tests/server/test_data_clients.py
(confluent-kafka and kcat in every codec); this checks the packaging side that makes them
hold on ``pip install seglog``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from seglog import compression
from seglog.format import COMPRESSION_NAMES

ROOT = Path(__file__).resolve().parents[1]
#: The library each compressed codec needs (gzip is the standard library's zlib).
CODEC_LIBRARIES = {"lz4": "lz4", "zstd": "zstandard", "snappy": "cramjam"}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()
            for requirement in requirements}


def test_codec_libraries_are_required_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = _requirement_names(project["dependencies"])
    assert set(CODEC_LIBRARIES.values()) <= required
    # The old extras stay as empty aliases (old install commands still resolve).
    extras = project["optional-dependencies"]
    assert extras.get("zstd", []) == [] and extras.get("snappy", []) == []


def test_every_kafka_codec_is_available():
    assert sorted(COMPRESSION_NAMES.values()) == ["gzip", "lz4", "none", "snappy", "zstd"]
    for name in COMPRESSION_NAMES.values():
        assert compression.is_available(name)
        data = b"seglog " * 1000
        cid = compression.codec_id(name)
        assert compression.decompress(cid, compression.compress(cid, data)) == data


def test_compression_imports_its_codecs_unconditionally():
    # A broken install fails at import, loudly, rather than refusing snappy or zstd later
    # with UNSUPPORTED_COMPRESSION_TYPE: no try/except around the codec imports.
    code = ("import sys; sys.modules['zstandard'] = None\n"
            "try:\n    import seglog.compression\nexcept ImportError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(ROOT / "src")}, check=True)
    assert done.stdout.strip() == "refused"
