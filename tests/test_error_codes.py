"""Kafka's error codes, one table (:mod:`seglog.error_codes`), checked against Kafka's own.

- The table against ``Errors.values()`` of the ``kafka-clients`` jar (marker ``kafka``): a small
  Java program compiled at test time prints every entry's code, name, retriable flag (its
  exception is a ``RetriableException``) and default message; every field must be equal, and
  no entry may be missing on either side. Without java, javac or the jars it skips
  (``SEGLOG_REQUIRE_KAFKA=1`` makes that a failure), as every Kafka-dependent test does.
- The module: its constants are its entries, its lookups, it imports nothing from seglog, and
  every :class:`~seglog.errors.SeglogError` carries a code the table has.
- The layout: no module under ``src/seglog`` but ``error_codes.py`` defines a Kafka error code
  as an integer (``NOT_LEADER_OR_FOLLOWER = 6``, ``ERROR_NONE = 0``, ``kafka_error_code = 2``,
  ``error_code=0``, kio's ``ErrorCode.none``); :data:`NOT_YET_CONVERTED` lists the modules
  that may until their rewrite.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess

import pytest

from seglog import error_codes as codes
from seglog import errors
from seglog.bench.kafka import find_kafka

SRC_DIR = pathlib.Path(__file__).resolve().parent.parent / "src" / "seglog"
TABLE_MODULE = SRC_DIR / "error_codes.py"

#: Modules that still define Kafka error codes themselves: they are being rewritten (issue 22,
#: item 1) and move to seglog.error_codes then. Only those that define one today are listed (the
#: rewrite's data.py, data_fetch.py and data_metadata.py import theirs from data_topics.py);
#: test_not_yet_converted_is_not_stale keeps the list from outliving them.
NOT_YET_CONVERTED: frozenset[str] = frozenset()

# --- the table against Kafka's jar --------------------------------------------------------------

_JAVA_SOURCE = r"""
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

/** Prints Errors.values(): code, name, retriable, message; tab-separated, one per line. */
public final class PrintErrors {
  private static String escape(String s) {
    return s == null ? "\\N"
        : s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
  }

  public static void main(String[] args) {
    for (Errors e : Errors.values()) {
      boolean retriable = e.exception() instanceof RetriableException;
      System.out.println(
          e.code() + "\t" + e.name() + "\t" + retriable + "\t" + escape(e.message()));
    }
  }
}
"""


def _unescape(text: str) -> str | None:
    if text == "\\N":
        return None
    out, chars = [], iter(text)
    for c in chars:
        if c == "\\":
            c = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[next(chars)]
        out.append(c)
    return "".join(out)


def _kafka_errors(tmp_path: pathlib.Path) -> tuple[str, list[codes.KafkaError]]:
    """``(kafka version, Errors.values())`` from the jar; skips (or fails under
    ``SEGLOG_REQUIRE_KAFKA=1``) without java, javac or the jars."""
    require = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
    ref, why = find_kafka()
    javac = shutil.which("javac")
    if ref is None or javac is None:
        why = why or "no javac on PATH (a JDK is needed to read Kafka's Errors)"
        if require:
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    jars = [sorted(ref.lib_dir.glob(pattern)) for pattern in ("kafka-clients-*.jar",
                                                              "slf4j-api-*.jar")]
    assert all(jars), f"kafka-clients or slf4j-api jar missing in {ref.lib_dir}"
    classpath = ":".join(str(found[0]) for found in jars)
    (tmp_path / "PrintErrors.java").write_text(_JAVA_SOURCE, encoding="utf-8")
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(tmp_path),
                    str(tmp_path / "PrintErrors.java")],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([ref.java, "-cp", f"{classpath}:{tmp_path}", "PrintErrors"],
                          capture_output=True, text=True, encoding="utf-8", timeout=120,
                          check=True)
    entries = []
    for line in done.stdout.splitlines():
        code, name, retriable, message = line.split("\t")
        assert retriable in ("true", "false"), line
        text = _unescape(message)
        assert text is not None, f"Errors.message() is null for {name}"
        entries.append(codes.KafkaError(code=int(code), name=name, retriable=retriable == "true",
                                        message=text))
    return ref.version, entries


@pytest.mark.kafka
def test_the_table_is_kafkas_errors_field_for_field(tmp_path):
    version, kafka = _kafka_errors(tmp_path)
    assert version == codes.KAFKA_VERSION
    assert len(kafka) > 100  # the program printed the whole enum, not an error's worth
    ours = {entry.code: entry for entry in codes.ERRORS}
    theirs = {entry.code: entry for entry in kafka}
    assert sorted(theirs.keys() - ours.keys()) == [], "codes Kafka has and the table lacks"
    assert sorted(ours.keys() - theirs.keys()) == [], "codes the table has and Kafka lacks"
    differences = [(ours[code], theirs[code]) for code in sorted(ours)
                   if ours[code] != theirs[code]]
    assert differences == []
    # The same order as Kafka's enum, too (by code, -1 first).
    assert [entry.code for entry in codes.ERRORS] == [entry.code for entry in kafka]


# --- the module ---------------------------------------------------------------------------------


def test_each_constant_is_its_entrys_code():
    constants = {name: value for name, value in vars(codes).items()
                 if name.isupper() and type(value) is int}
    assert constants == {entry.name: entry.code for entry in codes.ERRORS}
    assert codes.ERRORS[0] == codes.by_code(codes.UNKNOWN_SERVER_ERROR)
    assert (codes.UNKNOWN_SERVER_ERROR, codes.NONE, codes.NOT_LEADER_OR_FOLLOWER,
            codes.UNSUPPORTED_VERSION, codes.INVALID_REQUEST) == (-1, 0, 6, 35, 42)


def test_lookups():
    entry = codes.by_code(6)
    assert (entry.code, entry.name, entry.retriable) == (6, "NOT_LEADER_OR_FOLLOWER", True)
    assert codes.BY_CODE[6] is entry
    assert codes.name(codes.NOT_ENOUGH_REPLICAS) == "NOT_ENOUGH_REPLICAS"
    assert codes.is_retriable(codes.NOT_ENOUGH_REPLICAS)
    assert not codes.is_retriable(codes.INVALID_RECORD)
    assert not codes.is_retriable(codes.NONE)
    assert codes.message(codes.UNKNOWN_TOPIC_OR_PARTITION) == \
        "This server does not host this topic-partition."
    # A code Kafka 4.4 does not define (a newer peer's): by_code and message refuse it, name
    # and is_retriable answer for it.
    unknown = max(codes.BY_CODE) + 1
    with pytest.raises(KeyError):
        codes.by_code(unknown)
    with pytest.raises(KeyError):
        codes.message(unknown)
    assert codes.name(unknown) == f"UNKNOWN_ERROR_CODE_{unknown}"
    assert not codes.is_retriable(unknown)
    with pytest.raises(TypeError):
        codes.BY_CODE[unknown] = entry  # type: ignore[index]
    with pytest.raises(AttributeError):
        entry.code = 7  # type: ignore[misc]


def test_the_table_imports_nothing_from_seglog():
    tree = ast.parse(TABLE_MODULE.read_text(encoding="utf-8"))
    imported = [node for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom)
                and (node.level > 0 or (node.module or "").split(".")[0] == "seglog")
                or isinstance(node, ast.Import)
                and any(alias.name.split(".")[0] == "seglog" for alias in node.names)]
    assert [ast.unparse(node) for node in imported] == []


def _seglog_error_classes() -> list[type[errors.SeglogError]]:
    found, todo = [], [errors.SeglogError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_seglog_error_carries_a_code_kafka_defines():
    # Every subclass loaded by now, the cluster's and the server's too.
    import seglog.cluster.inter_broker  # noqa: F401
    import seglog.cluster.zk_client  # noqa: F401

    classes = _seglog_error_classes()
    assert len(classes) > 40
    unknown = [(cls.__qualname__, cls.kafka_error_code) for cls in classes
               if cls.kafka_error_code not in codes.BY_CODE]
    assert unknown == []
    assert errors.CorruptRecordError.kafka_error_code == codes.CORRUPT_MESSAGE
    assert errors.InvalidRequestError.kafka_error_code == codes.INVALID_REQUEST


# --- the layout: one table ------------------------------------------------------------------------


def _int_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


_KAFKA_NAMES = frozenset(entry.name for entry in codes.ERRORS)


def _is_code_name(name: str) -> bool:
    """``NOT_LEADER_OR_FOLLOWER``, ``ERROR_NONE``, ``_INVALID_REQUEST``: a Kafka error's name."""
    return name.lstrip("_").upper().removeprefix("ERROR_") in _KAFKA_NAMES


def _names_an_error_code(name: str) -> bool:
    """A Kafka error's name, or ``kafka_error_code``, ``error_code``: a name that says it holds
    a Kafka error code."""
    return _is_code_name(name) or "error_code" in name.lower()


def _pairs(target: ast.expr, value: ast.expr):
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from _pairs(t, v)
    elif isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, ast.Attribute):
        yield target.attr, value


def _bindings(node: ast.AST):
    """``(name, value)`` for what ``node`` binds: assignments (tuples unpacked), keyword
    arguments of calls and parameter defaults."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _pairs(target, node.value)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield from _pairs(node.target, node.value)
    elif isinstance(node, ast.keyword) and node.arg is not None:
        yield node.arg, node.value
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        positional = args.posonlyargs + args.args
        yield from ((arg.arg, default) for arg, default in
                    zip(positional[len(positional) - len(args.defaults):], args.defaults))
        yield from ((arg.arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults)
                    if default is not None)


def error_code_definitions(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every Kafka error code ``source`` defines outside the table: an int
    literal bound to a name that holds one, a local alias of a table entry (``ERROR_NONE =
    codes.NONE``: use sites write ``codes.NONE``), or a member of kio's ``ErrorCode`` enum (a
    second table)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for name, value in _bindings(node):
            if _names_an_error_code(name) and _int_literal(value):
                found.append((getattr(node, "lineno", value.lineno),
                              f"{name} = {ast.unparse(value)}"))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_code_name(name) \
                    and isinstance(value, ast.Attribute) and value.attr in _KAFKA_NAMES:
                found.append((node.lineno, f"{name} = {ast.unparse(value)}"))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "ErrorCode":
            found.append((node.lineno, f"ErrorCode.{node.attr}"))
    return sorted(found)


def _offenders() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(SRC_DIR.rglob("*.py")):
        if path == TABLE_MODULE:
            continue
        found = error_code_definitions(path.read_text(encoding="utf-8"))
        if found:
            out[path.relative_to(SRC_DIR).as_posix()] = found
    return out


def test_no_module_defines_a_kafka_error_code_outside_the_table():
    offenders = {path: found for path, found in _offenders().items()
                 if path not in NOT_YET_CONVERTED}
    assert offenders == {}, "write `from seglog import error_codes as codes` and codes.NAME"


def test_not_yet_converted_is_not_stale():
    offenders = _offenders()
    assert sorted(path for path in NOT_YET_CONVERTED if not (SRC_DIR / path).exists()) == []
    # Once a module stops defining codes it leaves the list, so that it cannot start again.
    assert sorted(NOT_YET_CONVERTED - offenders.keys()) == []


@pytest.mark.parametrize("source, expected", [
    ("NOT_LEADER_OR_FOLLOWER = 6", ["NOT_LEADER_OR_FOLLOWER = 6"]),
    ("ERROR_NONE = 0", ["ERROR_NONE = 0"]),
    ("_INVALID_REQUEST: int = 42", ["_INVALID_REQUEST = 42"]),
    ("NONE, UNKNOWN_SERVER_ERROR = 0, -1", ["NONE = 0", "UNKNOWN_SERVER_ERROR = -1"]),
    ("class E:\n    kafka_error_code = 2", ["kafka_error_code = 2"]),
    ("def f(*, error_code: int = 0): pass", ["error_code = 0"]),
    ("f(error_code=3)", ["error_code = 3"]),
    ("x = ErrorCode.none", ["ErrorCode.none"]),
    # Not error codes: other constants, and codes taken from the table.
    ("API_VERSIONS_KEY = 18\nEMPTY = 0\nRESOURCE_TOPIC = 2", []),
    ("f(error_code=codes.NONE)\nx = ErrorCode(codes.NONE)\n"
     "class E:\n    kafka_error_code = codes.CORRUPT_MESSAGE", []),
    # A local alias of an entry: use sites write codes.NAME instead.
    ("ERROR_NONE = codes.NONE\nNOT_COORDINATOR: int = error_codes.NOT_COORDINATOR",
     ["ERROR_NONE = codes.NONE", "NOT_COORDINATOR = error_codes.NOT_COORDINATOR"]),
])
def test_the_layout_check_sees_each_shape(source, expected):
    assert [what for _line, what in error_code_definitions(source)] == expected
