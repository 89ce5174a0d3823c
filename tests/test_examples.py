"""Every code example of README.md and docs/*.md runs in a test and shows what it promises.

The convention is in ``tests/doc_examples.py``: ``python`` and ``sh`` blocks are examples,
run here in a fresh temporary directory (python in a subprocess with this checkout's src,
sh with bash and a ``seglog`` command on PATH), unless a ``<!-- not-run: REASON -->`` comment
stands above them; the README's multi-block scenarios are run by the tests named in
``doc_examples.DEDICATED``. Each run checks the example's promises (``# -> TEXT`` lines, a
pytest module passing, or a named check below). ``mypy --strict`` runs over every python
block. A tool the examples use (kcat, openssl, curl) that is missing skips its examples with its
name, and fails them under ``CI=true`` (CI installs them).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from doc_examples import (DEDICATED, OTHER_LANGS, REPO, RUN_LANGS, SRC, Block, all_blocks,
                          check_output, env_with_seglog, free_port, stop_pid, stop_process,
                          wait_listening)

BLOCKS = all_blocks()
RUN_S_MAX = 120
#: Tools an sh example may use that are not this package (CI installs them).
TOOLS = ("kcat", "openssl", "curl")


def _generic(block: Block) -> bool:
    return block.is_example and block.not_run is None and not (
        block.doc == "README.md" and block.name in DEDICATED)


GENERIC = [b for b in BLOCKS if _generic(b)]


# --- the convention itself --------------------------------------------------------------

def test_every_block_names_its_language():
    unnamed = [b.id for b in BLOCKS if b.lang not in RUN_LANGS | OTHER_LANGS]
    assert not unnamed, ("fenced blocks must say python/sh (an example) or text/properties/"
                         f"json/yaml/toml (not run): {unnamed}")


def test_not_run_markers_give_a_reason():
    bare = [b.id for b in BLOCKS if b.not_run is not None and len(b.not_run) < 10]
    assert not bare, f"<!-- not-run: REASON --> needs a reason: {bare}"
    misplaced = [b.id for b in BLOCKS if b.not_run is not None and not b.is_example]
    assert not misplaced, f"not-run marks a block that is not an example anyway: {misplaced}"


def test_dedicated_tests_exist_and_name_readme_blocks():
    readme_names = {b.name for b in BLOCKS if b.doc == "README.md" and b.is_example}
    assert set(DEDICATED) <= readme_names, set(DEDICATED) - readme_names
    for test in set(DEDICATED.values()):
        path, name = test.split("::")
        tree = ast.parse((REPO / path).read_text())
        assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, test


def test_every_example_promises_something():
    """An example without a promise a test checks is only checked not to raise."""
    silent = [b.id for b in GENERIC
              if not b.expected_lines and not b.is_pytest_module and b.name not in CHECKS]
    assert not silent, ("give these examples a `# -> TEXT` line, a test function, or a named "
                        f"check in tests/test_examples.py: {silent}")


# --- running them -----------------------------------------------------------------------

def _rewrite_ports(text: str, ports: dict[str, int]) -> str:
    """Every port an example names on 127.0.0.1 or localhost (9092, 9093, a metrics port)
    -> a free one, the same for each mention."""
    def repl(m: re.Match[str]) -> str:
        port = ports.setdefault(m.group(2), free_port())
        return f"{m.group(1)}:{port}"
    return re.sub(r"(127\.0\.0\.1|localhost):([1-9]\d{3,4})\b", repl, text)


def _tools_or_skip(block: Block) -> None:
    for tool in TOOLS:
        if block.lang != "python" and re.search(rf"\b{tool}\b", block.text) \
                and shutil.which(tool) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{tool} is not installed (CI installs it)", pytrace=False)
            pytest.skip(f"{tool} is not installed")


class _Broker:
    """``seglog serve`` as a subprocess on a free port, for examples that name 9092 and do
    not start a broker themselves."""

    def __init__(self, tmp_path: Path, port: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seglog", "serve", "--data-dir",
             str(tmp_path / ".broker-data"), "--listen", f"127.0.0.1:{port}"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        wait_listening(port, self.proc)

    def stop(self) -> str:
        stop_process(self.proc)
        out, _ = self.proc.communicate(timeout=60)
        return out


def _run_python(block: Block, text: str, tmp_path: Path,
                env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if block.is_pytest_module:
        (tmp_path / "test_doc_example.py").write_text(text)
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:seglog",
             "-p", "seglog.pytest_plugin", "test_doc_example.py"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_S_MAX)
    (tmp_path / "example.py").write_text(text)
    return subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=RUN_S_MAX)


def _run_sh(text: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The block with bash (-euo pipefail); what it left in the background is stopped by
    pid after it (the trap writes the pids of its jobs). Output goes through files: a
    background job holds a pipe open after the script ends."""
    script = "trap 'jobs -p > .bg-pids' EXIT\n" + text
    out_path, err_path = tmp_path / ".stdout", tmp_path / ".stderr"
    try:
        with open(out_path, "w") as out, open(err_path, "w") as err:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                                  env=env, stdout=out, stderr=err, timeout=RUN_S_MAX)
    finally:
        pids = tmp_path / ".bg-pids"
        if pids.exists():
            for pid in pids.read_text().split():
                stop_pid(int(pid))
    return subprocess.CompletedProcess(done.args, done.returncode, out_path.read_text(),
                                       err_path.read_text())


@pytest.mark.parametrize("block", GENERIC, ids=[b.id for b in GENERIC])
def test_example(block: Block, tmp_path: Path) -> None:
    _tools_or_skip(block)
    env = env_with_seglog(tmp_path)
    ports: dict[str, int] = {}
    text = _rewrite_ports(block.text, ports)
    if block.name in CHECKS:
        CHECKS[block.name](text, ports, tmp_path, env)
        return
    needs_broker = "9092" in ports and "seglog serve" not in block.text
    broker = _Broker(tmp_path, ports["9092"], env) if needs_broker else None
    try:
        if block.lang == "python":
            done = _run_python(block, text, tmp_path, env)
        else:
            done = _run_sh(text, tmp_path, env)
    finally:
        broker_log = broker.stop() if broker is not None else ""
    assert done.returncode == 0, done.stdout + done.stderr + broker_log
    if block.is_pytest_module:
        assert re.search(r"\b\d+ passed\b", done.stdout), done.stdout
    check_output([_rewrite_ports(line, ports) for line in block.expected_lines], done.stdout)


# --- named checks (examples whose promise is more than their output) --------------------

def _serve_foreground(text: str, ports: dict[str, int], tmp_path: Path,
                      env: dict[str, str]) -> None:
    """docs/server.md "Running it": the command runs in the foreground until SIGTERM; its
    broker has the configs given (a topic a client creates by producing gets
    num.partitions=3), and SIGTERM stops it cleanly (exit 0)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    assert text.lstrip().startswith("seglog serve"), text
    server = subprocess.Popen(["bash", "-c", "exec " + text.strip()], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_listening(ports["9092"], server)
        bootstrap = {"bootstrap.servers": f"127.0.0.1:{ports['9092']}"}
        producer = Producer(bootstrap)
        producer.produce("events", b"hello")
        assert producer.flush(30) == 0
        topics = AdminClient(bootstrap).list_topics(timeout=30).topics
        assert len(topics["events"].partitions) == 3
    finally:
        stop_process(server)
        out, _ = server.communicate(timeout=60)
    assert server.returncode == 0, out
    assert (tmp_path / "seglog-data" / "events-0").is_dir(), out


CHECKS: dict[str, Callable[[str, dict[str, int], Path, dict[str, str]], None]] = {
    "serve-foreground": _serve_foreground,
}


# --- mypy --strict over every python example ---------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_python_examples_pass_mypy_strict(tmp_path: Path) -> None:
    """Every python block of README.md and docs/ (run or not) is a module that
    ``mypy --strict`` accepts, with this checkout's src on the path: the public API they use
    is annotated. seglog's own modules are analysed but not reported on (their rules are
    tests/test_typing_package.py's)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    typed = (Path(confluent_kafka.__file__).parent / "py.typed").exists()
    if not (typed and hasattr(confluent_kafka, "ShareConsumer")) and os.environ.get("CI") != "true":
        pytest.skip(f"confluent-kafka {confluent_kafka.version()[0]}: the examples are typed "
                    "against 2.16+ (its own type information and ShareConsumer)")
    files = []
    for block in BLOCKS:
        if block.lang == "python":
            stem = re.sub(r"\W", "_", f"{block.doc[:-3]}_{block.line}")
            path = tmp_path / f"ex_{stem}.py"
            path.write_text(block.text)
            files.append(str(path))
    assert files
    config = tmp_path / "mypy.ini"
    # confluent_kafka.admin re-exports its classes without __all__ (its own stubs' gap).
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n"
                      f"mypy_path = {SRC}\n"
                      "[mypy-confluent_kafka.*]\nimplicit_reexport = True\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
         "--cache-dir", str(tmp_path / ".mypy_cache"), "--python-version", "3.10", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "MYPYPATH": str(SRC)})
    assert done.returncode == 0, done.stdout + done.stderr


_DUNDERS_OF_THE_API = frozenset({"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__",
                                 "__iter__", "__contains__", "__len__", "__getitem__"})


def _annotation_gaps(qualname: str, func: object) -> list[str]:
    import inspect

    try:
        sig = inspect.signature(func)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    gaps = [f"{qualname}({p.name})" for p in sig.parameters.values()
            if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and not qualname.endswith("__init__"):
        gaps.append(f"{qualname} -> ?")
    return gaps


def test_public_api_is_annotated() -> None:
    """Every function, method and property of ``seglog.__all__``'s classes that seglog
    defines has annotated parameters and a return annotation (what mypy --strict on the
    examples relies on: an unannotated parameter is Any there and checks nothing)."""
    import enum
    import inspect

    import seglog

    gaps: list[str] = []
    for name in seglog.__all__:
        obj = getattr(seglog, name)
        if inspect.isclass(obj):
            if issubclass(obj, (BaseException, enum.Enum)):
                continue
            for klass in obj.__mro__:
                if not klass.__module__.startswith("seglog"):
                    continue
                for member, raw in vars(klass).items():
                    if member.startswith("_") and member not in _DUNDERS_OF_THE_API:
                        continue
                    where = f"seglog.{name}.{member}"
                    if isinstance(raw, property):
                        if raw.fget is not None:
                            gaps += _annotation_gaps(where, raw.fget)
                    elif isinstance(raw, (staticmethod, classmethod)):
                        gaps += _annotation_gaps(where, raw.__func__)
                    elif inspect.isfunction(raw):
                        gaps += _annotation_gaps(where, raw)
        elif inspect.isfunction(obj):
            gaps += _annotation_gaps(f"seglog.{name}", obj)
    assert not sorted(set(gaps)), sorted(set(gaps))
