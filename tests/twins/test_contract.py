"""The twin contract in code (``seglog._contract``) against both backends and the stubs.

Three checks, each in both directions so that a name added on one side only fails:

* every name a contract Protocol lists exists on both backends (the module, its classes and
  instances of them), with the same parameters (names, kinds, defaults) for every method;
* neither backend has a public name (no leading ``_``) the contract lacks, at module level
  (its own submodules aside: implementation files) and on each contract class;
* the ``.pyi`` stubs of ``seglog._native`` list exactly the public names of the compiled
  modules and of their classes, with the same parameters.

Plus the drift the Python layer used to work around: empty reads of a Segment.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import inspect
import os
import types
from pathlib import Path

import pytest

import seglog
from seglog import _contract

CONTRACT_PATH = Path(_contract.__file__)
NATIVE_DIR = Path(seglog.__file__).parent / "_native"
#: Contract Protocol -> the backend attribute that is its class.
CONTRACT_CLASSES = ("Record", "ConsumerRecord", "Batch", "Columns", "Segment", "OffsetIndex",
                    "TimeIndex", "KeyMap")


# --- reading the contract and the stubs with ast ------------------------------------------------


def _class_defs(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _is_property(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def _members(classes: dict[str, ast.ClassDef], name: str) -> dict[str, ast.AST]:
    """Members declared by class ``name`` and its bases defined in the same file (a base
    declared later in the walk loses to the class's own declaration)."""
    members: dict[str, ast.AST] = {}
    node = classes[name]
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            members.update(_members(classes, base.id))
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members[item.name] = item
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members[item.target.id] = item
    return members


def _public(names) -> set[str]:
    # "@py_builtins" and "@pytest_ar" are pytest's: seglog's pytest11 plugin entry point makes
    # pytest rewrite the asserts of every module of the seglog distribution it imports.
    return {n for n in names if not n.startswith(("_", "@"))}


CONTRACT_TREE = ast.parse(CONTRACT_PATH.read_text())
CONTRACT = _class_defs(CONTRACT_TREE)


def _contract_names(name: str) -> set[str]:
    return _public(_members(CONTRACT, name))


def _contract_methods(name: str) -> dict[str, ast.FunctionDef]:
    """Public methods (not properties) of contract class ``name``, plus ``open``."""
    return {n: node for n, node in _members(CONTRACT, name).items()
            if isinstance(node, ast.FunctionDef) and not n.startswith("_")
            and not _is_property(node)}


def _parameters_of_ast(node: ast.FunctionDef) -> list[tuple[str, str, object]]:
    """``(name, kind, default)`` of a def without its ``self``/``cls``; a default is its
    literal value, or ``...`` when it is an expression (a stub's ``= ...``, a name)."""
    args = node.args
    positional = args.posonlyargs + args.args
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = []
    for arg, default in zip(positional, defaults):
        out.append((arg.arg, "positional", _literal(default)))
    if args.vararg is not None:
        out.append((args.vararg.arg, "var_positional", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append((arg.arg, "keyword_only", _literal(default)))
    if args.kwarg is not None:
        out.append((args.kwarg.arg, "var_keyword", None))
    return out


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return None
    try:
        return ("default", ast.literal_eval(node))
    except ValueError:
        return ("default", ...)


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


def _parameters_of(function) -> list[tuple[str, str, object]]:
    """As :func:`_parameters_of_ast`, from a live function (pure or compiled)."""
    parameters = list(inspect.signature(function).parameters.values())
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    out = []
    for p in parameters:
        default = None if p.default is inspect.Parameter.empty else ("default", p.default)
        out.append((p.name, _KINDS[p.kind], default))
    return out


def _contract_parameters(node: ast.FunctionDef) -> list[tuple[str, str, object]]:
    """Contract parameters with named defaults evaluated in the contract module."""
    args = node.args
    out = _parameters_of_ast(node)
    named = {}
    for arg, default in zip(args.args[len(args.args) - len(args.defaults):], args.defaults):
        if isinstance(default, ast.Name):
            named[arg.arg] = getattr(_contract, default.id)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if isinstance(default, ast.Name):
            named[arg.arg] = getattr(_contract, default.id)
    return [(n, k, ("default", named[n]) if n in named else d) for n, k, d in out]


# --- instances of every contract class, on one backend ------------------------------------------


def _instances(backend, tmp_path: Path) -> dict[str, object]:
    """One live instance of each contract class, built as the contract documents (keyword
    arguments where the contract names them, so a renamed parameter fails here)."""
    data = backend.encode_batch([b"v1", b"v2"], keys=[b"k", None], timestamps_ms=5)
    segment = backend.Segment.open(str(tmp_path / "segment"), 0, create=True)
    segment.append(data)
    batch = next(backend.iter_batches(data))
    (tmp_path / "indexes").mkdir()
    offset_index = backend.OffsetIndex(path=str(tmp_path / "indexes" / "0.index"), base_offset=0,
                                       max_index_bytes=80, writable=True, preallocate=False)
    time_index = backend.TimeIndex(path=str(tmp_path / "indexes" / "0.timeindex"),
                                   base_offset=0, max_index_bytes=120)
    return {
        "Record": backend.Record(offset=1, timestamp_ms=2, key=b"k", value=None, headers=()),
        "ConsumerRecord": backend.ConsumerRecord(topic="t", partition=0, offset=1,
                                                 timestamp_ms=2, key=b"k", value=None,
                                                 headers=()),
        "Batch": batch,
        "Columns": backend.decode_columns(data),
        "Segment": segment,
        "OffsetIndex": offset_index,
        "TimeIndex": time_index,
        "KeyMap": backend.KeyMap(memory_bytes_max=1 << 12),
    }


@pytest.fixture
def instances(backend, tmp_path):
    """``_instances`` for the ``backend`` fixture (tests/conftest.py: native and pure), closed
    afterwards."""
    (tmp_path / "segment").mkdir()
    built = _instances(backend, tmp_path)
    yield built
    for name in ("Segment", "OffsetIndex", "TimeIndex"):
        built[name].close()


# --- the backends against the contract ----------------------------------------------------------


def test_module_has_every_contract_name_and_no_other(backend):
    contract = _contract_names("Backend")
    public = _public(dir(backend))
    assert contract - public == set(), f"{backend.name} lacks contract names"
    own_submodules = {n for n in public if isinstance(getattr(backend, n), types.ModuleType)
                      and getattr(backend, n).__name__.startswith(backend.__name__ + ".")}
    # Submodules are implementation files; the one the Python layer uses is in the contract.
    extra = public - contract - own_submodules
    assert extra == set(), f"{backend.name} has public names the contract lacks"
    assert set(backend.__all__) == contract


@pytest.mark.parametrize("name", CONTRACT_CLASSES)
def test_class_has_every_contract_name_and_no_other(backend, instances, name):
    contract = _contract_names(name)
    cls = getattr(backend, name)
    public = _public(dir(cls)) | _public(dir(instances[name]))
    assert contract - public == set(), f"{backend.name}.{name} lacks contract names"
    assert public - contract == set(), f"{backend.name}.{name} has public names the contract lacks"
    assert isinstance(instances[name], cls)


@pytest.mark.parametrize("name", CONTRACT_CLASSES)
def test_class_declares_the_contract_dunders(backend, name):
    """``len(columns)``, ``tuple(record)``, ``with segment:``: the special methods the contract
    declares are defined by the backend class itself, not inherited from object."""
    declared = {n for n in _members(CONTRACT, name) if n.startswith("__") and n != "__init__"}
    cls = getattr(backend, name)
    for dunder in declared:
        owner = next(k for k in cls.__mro__ if dunder in vars(k))
        assert owner is not object, f"{backend.name}.{name}.{dunder}"


@pytest.mark.parametrize("name", CONTRACT_CLASSES + ("Backend",))
def test_methods_have_the_contract_parameters(backend, name):
    target = backend if name == "Backend" else getattr(backend, name)
    for method, node in _contract_methods(name).items():
        expected = _contract_parameters(node)
        actual = _parameters_of(getattr(target, method))
        assert actual == expected, f"{backend.name}.{name}.{method}"


def test_keymap_module_has_the_contract_names(backend):
    """``<backend>.keymap`` holds what the contract lists (its other names are the module's
    own; the native one is held to its stub below)."""
    assert _contract_names("KeyMapModule") - _public(dir(backend.keymap)) == set()
    assert backend.keymap.KeyMap is backend.KeyMap
    for method, node in _contract_methods("KeyMapModule").items():
        assert _parameters_of(getattr(backend.keymap, method)) == \
            _contract_parameters(node), method


def test_the_contract_checks_can_fail():
    """The name and parameter comparisons see a difference (guards the helpers above)."""
    assert _contract_names("Segment") - {"read"} != _contract_names("Segment")
    node = _contract_methods("Segment")["read"]
    assert _contract_parameters(node) != _parameters_of(lambda self, offset, max_bytes: None)


# --- the stubs against the compiled modules -----------------------------------------------------


NATIVE_SKIPPED = os.environ.get("SEGLOG_BACKEND", "").strip().lower() == "pure"


def _compiled_modules() -> list[str]:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(p.name.split(".")[0] for p in NATIVE_DIR.iterdir() if p.name.endswith(suffixes))


def _stub_names(tree: ast.Module) -> set[str]:
    """Public names a stub defines or re-exports (``from x import y as y``, PEP 484)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.asname == a.name)
    return _public(names)


def _module_public_names(module: types.ModuleType) -> set[str]:
    """A compiled module's public names, its imported modules (``np``, ``os``) aside."""
    return {n for n in _public(dir(module)) if not isinstance(getattr(module, n), types.ModuleType)}


@pytest.mark.skipif(NATIVE_SKIPPED, reason="SEGLOG_BACKEND=pure: the twin only")
def test_every_compiled_module_has_a_stub():
    compiled = _compiled_modules()
    assert compiled, "the native extensions are not built"
    stubs = sorted(p.stem for p in NATIVE_DIR.glob("*.pyi"))
    assert stubs == compiled
    assert (NATIVE_DIR / "py.typed").exists()


@pytest.mark.skipif(NATIVE_SKIPPED, reason="SEGLOG_BACKEND=pure: the twin only")
@pytest.mark.parametrize("module_name", _compiled_modules())
def test_stub_lists_exactly_the_public_names(module_name):
    module = importlib.import_module(f"seglog._native.{module_name}")
    tree = ast.parse((NATIVE_DIR / f"{module_name}.pyi").read_text())
    assert _stub_names(tree) == _module_public_names(module)
    classes = _class_defs(tree)
    for class_name in _public(classes):
        cls = getattr(module, class_name)
        members = _members(classes, class_name)
        assert _public(members) == _public(dir(cls)), f"{module_name}.{class_name}"
        for method, node in members.items():
            if (method.startswith("_") or not isinstance(node, ast.FunctionDef)
                    or _is_property(node)):
                continue
            assert _shape(_parameters_of(getattr(cls, method))) == \
                _shape(_parameters_of_ast(node)), f"{module_name}.{class_name}.{method}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert _shape(_parameters_of(getattr(module, node.name))) == \
                _shape(_parameters_of_ast(node)), f"{module_name}.{node.name}"


def _shape(parameters):
    """Names, kinds and whether there is a default (a stub may write ``= ...``)."""
    return [(n, k, d is not None) for n, k, d in parameters]


# --- drift: empty reads ------------------------------------------------------------------------


def _check_usable(view: memoryview) -> None:
    assert view.nbytes == 0 and bytes(view) == b"" and view.readonly


def test_empty_reads_are_fresh_views_that_recover_leaves_alone(backend, tmp_path):
    """Each empty ``read()`` is its own view: releasing one, or ``recover()`` of the empty
    segment, leaves the others usable (the pure twin once returned one shared view that
    ``recover()`` released, and ``Log`` had to catch the ValueError of ``.nbytes``)."""
    segment = backend.Segment.open(str(tmp_path), 0, create=True)
    first, second = segment.read(0, 100), segment.read(0, 100)
    assert first is not second
    first.release()
    _check_usable(second)
    result = segment.recover()
    assert (result.valid_bytes, result.truncated_bytes, result.reason) == (0, 0, "")
    _check_usable(second)
    _check_usable(segment.read(0, 100))
    segment.append(backend.encode_batch([b"x"]))
    past_end = segment.read(1, 100)
    _check_usable(past_end)
    segment.recover()
    _check_usable(past_end)
    whole = segment.read(0, 100)
    assert whole.nbytes > 0
    whole.release()
    segment.close()
    reader = backend.Segment.open(str(tmp_path), 0, read_only=True)
    empty = reader.read(1, 100)
    _check_usable(empty)
    reader.read(1, 100).release()
    _check_usable(empty)
    reader.close()


def test_a_reader_without_index_files_has_no_index_objects(backend, tmp_path):
    """``Segment.offset_index``/``time_index`` are ``OffsetIndex | None`` in the contract: a
    read-only open of a segment whose index files are missing has None for both (and
    ``indexes_need_rebuild``) on both backends, and still reads by scanning; a writer opening
    the same files creates both indexes."""
    writer = backend.Segment.open(str(tmp_path), 0, create=True)
    writer.append(backend.encode_batch([b"a", b"b", b"c"]))
    writer.close()
    os.remove(writer.index_path)
    os.remove(writer.time_index_path)
    reader = backend.Segment.open(str(tmp_path), 0, read_only=True)
    assert (reader.offset_index, reader.time_index) == (None, None)
    assert reader.indexes_need_rebuild
    assert reader.next_offset == 3
    assert reader.translate_offset(1) == (0, 0, writer.size_bytes)
    reader.close()
    writer = backend.Segment.open(str(tmp_path), 0)
    assert writer.offset_index is not None and writer.time_index is not None
    assert writer.indexes_need_rebuild
    writer.close()
