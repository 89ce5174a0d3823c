"""The negative-control switches (seglog.cluster.test_breaks)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from seglog.cluster import test_breaks

SRC_DIR = str(pathlib.Path(__file__).resolve().parents[2] / "src")


def test_off_without_the_variable(monkeypatch):
    """No SEGLOG_TEST_BREAK (or an empty one): every flag is off."""
    monkeypatch.delenv(test_breaks.ENV_VAR, raising=False)
    assert not any(test_breaks.enabled(flag) for flag in test_breaks.FLAGS)
    monkeypatch.setenv(test_breaks.ENV_VAR, "")
    assert not any(test_breaks.enabled(flag) for flag in test_breaks.FLAGS)


def test_comma_separated_flags(monkeypatch):
    """``flag[,flag]``, spaces ignored: exactly the named flags are on."""
    monkeypatch.setenv(test_breaks.ENV_VAR, " truncate_to_hw , skip_epoch_check")
    assert test_breaks.enabled("truncate_to_hw")
    assert test_breaks.enabled("skip_epoch_check")
    assert not test_breaks.enabled("ack_on_append")
    assert not test_breaks.enabled("elect_most_recent")


def test_unknown_name_in_code_is_refused():
    """A typo in the caller is a loud error, not a control that silently never fires."""
    with pytest.raises(ValueError):
        test_breaks.enabled("truncate_to_high_watermark")


def test_each_flag_logged_once_at_warning():
    """An enabled flag is logged once per process at WARNING, however often it is asked; an
    unknown name in the variable is logged once and ignored (a fresh process, so that no other
    test has logged the flag already)."""
    code = (
        "import logging; logging.basicConfig(format='%(levelname)s %(message)s')\n"
        "from seglog.cluster import test_breaks\n"
        "for _ in range(3):\n"
        "    assert test_breaks.enabled('elect_most_recent')\n"
        "    assert not test_breaks.enabled('ack_on_append')\n"
    )
    env = dict(os.environ, **{test_breaks.ENV_VAR: "elect_most_recent,no_such_flag"})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC_DIR, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert sum("'elect_most_recent' is ON" in line for line in lines) == 1
    assert sum("unknown flag 'no_such_flag'" in line for line in lines) == 1
    assert all(line.startswith("WARNING ") for line in lines)
    assert len(lines) == 2
