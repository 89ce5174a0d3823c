"""The negative-control seam (seglog.cluster.test_breaks): an immutable TestBreaks built once
from ``seglog serve --test-break NAME`` (or by a test), never from the environment."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import pytest

from seglog.cluster import test_breaks
from seglog.cluster.test_breaks import FLAGS, NO_TEST_BREAKS, TestBreaks

REPO = pathlib.Path(__file__).resolve().parents[2]
SRC_DIR = str(REPO / "src")
#: Bound on one ``seglog serve`` start and stop.
SERVE_TIMEOUT_S = 60


def test_default_is_every_flag_off():
    """The default seam has every flag and hook off, whatever the environment says."""
    assert not any(NO_TEST_BREAKS.enabled(flag) for flag in FLAGS)
    assert not NO_TEST_BREAKS.expose_zk_session and not NO_TEST_BREAKS.any
    assert TestBreaks() == NO_TEST_BREAKS


def test_exactly_the_named_flags_are_on():
    breaks = TestBreaks.of("truncate_to_hw", "skip_epoch_check")
    assert breaks.enabled("truncate_to_hw") and breaks.enabled("skip_epoch_check")
    assert not breaks.enabled("ack_on_append") and not breaks.enabled("elect_most_recent")
    assert breaks.any and not breaks.expose_zk_session
    assert TestBreaks(frozenset({"truncate_to_hw", "skip_epoch_check"})) == breaks


def test_unknown_names_are_refused_at_construction_and_when_asked():
    """A typo is a loud error, in the seam's maker and in the module that asks."""
    with pytest.raises(ValueError, match="truncate_to_high_watermark"):
        TestBreaks.of("truncate_to_high_watermark")
    with pytest.raises(ValueError, match="truncate_to_high_watermark"):
        NO_TEST_BREAKS.enabled("truncate_to_high_watermark")


def test_immutable():
    breaks = TestBreaks.of("ack_on_append")
    with pytest.raises(dataclasses.FrozenInstanceError):
        breaks.flags = frozenset()  # type: ignore[misc]
    assert isinstance(breaks.flags, frozenset)
    hash(breaks)


def test_command_line_round_trip():
    """What LocalCluster passes to ``seglog serve`` builds an equal object there."""
    from seglog.cli import build_parser

    breaks = TestBreaks.of("elect_most_recent", "ack_on_append", expose_zk_session=True)
    options = breaks.command_line()
    assert options == ["--test-break", "ack_on_append", "--test-break", "elect_most_recent",
                       "--test-expose-zk-session"]
    args = build_parser().parse_args(["serve", *options])
    assert TestBreaks(frozenset(args.test_breaks),
                      expose_zk_session=args.test_expose_zk_session) == breaks
    assert NO_TEST_BREAKS.command_line() == []


def test_serve_options_are_hidden_from_help():
    from seglog.cli import build_parser

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # noqa: SLF001
    assert "test-break" not in serve.format_help()
    assert "expose-zk-session" not in serve.format_help()


def _serve(tmp_path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    environ = dict(os.environ, **(env or {}))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC_DIR, environ.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--data-dir", str(tmp_path / "data"),
         "--listen", "127.0.0.1:0", "--log-level", "WARNING", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)


def test_serve_refuses_an_unknown_test_break(tmp_path):
    proc = _serve(tmp_path, "--test-break", "no_such_flag")
    output, _ = proc.communicate(timeout=SERVE_TIMEOUT_S)
    assert proc.returncode == 2
    assert "unknown test break 'no_such_flag'" in output


def test_serve_says_which_breaks_are_on_and_ignores_the_old_variable(tmp_path):
    """``seglog serve --test-break`` logs each control once at WARNING when it starts; the
    environment variable of the old mechanism switches nothing on."""
    import signal
    import time

    proc = _serve(tmp_path, "--test-break", "elect_most_recent", "--test-break",
                  "ack_on_append", env={"SEGLOG_TEST_BREAK": "truncate_to_hw"})
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while not (tmp_path / "data" / "meta.properties").exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=SERVE_TIMEOUT_S)
    assert proc.returncode == 0, output
    on = re.findall(r"WARNING .*negative control '(\w+)' is ON", output)
    assert sorted(on) == ["ack_on_append", "elect_most_recent"], output


def test_no_product_module_reads_the_environment_for_breaks():
    """The seam is explicit: no module under src/ names the old variables."""
    offenders = [str(path.relative_to(REPO)) for path in (REPO / "src").rglob("*.py")
                 if re.search(r"SEGLOG_TEST_(BREAK|EXPOSE_ZK_SESSION)", path.read_text())]
    assert offenders == []
    assert not hasattr(test_breaks, "ENV_VAR")
