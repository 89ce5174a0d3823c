"""The README's usage example runs as written (in a temporary directory), on the default backend."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    src = str(README.parent / "src")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "SEGLOG_REQUIRE_NATIVE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "b'k3' b'c'" in result.stdout
    assert (tmp_path / "data" / "clicks-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "data" / "store" / "recovery-point-offset-checkpoint").exists()


def test_readme_commands_are_the_ci_commands():
    text = README.read_text()
    test_block = re.search(r"<!-- test-command -->\n```\n(.*?)\n```", text, flags=re.S)
    run_block = re.search(r"<!-- run-command -->\n```\n(.*?)\n```", text, flags=re.S)
    assert test_block and "pytest" in test_block.group(1)
    assert run_block and "seglog bench" in run_block.group(1)
