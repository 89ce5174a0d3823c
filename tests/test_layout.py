"""The layout's import rules, checked by reading the source (docs/design.md, section 3).

Every module of ``src/seglog`` is parsed with :mod:`ast`, and every ``import`` statement in it
counts, wherever it stands: at module level, inside a function, under ``if TYPE_CHECKING``.
The Cython modules (``src/_native/<name>.pyx``, importable as ``seglog._native.<name>``) are
not Python syntax; their ``import`` and ``cimport`` statements are cut out of the text and
parsed the same way. A ``cimport`` from a seglog module counts: the cimporting module imports
that module when it loads (Cython's ``__pyx_capi__`` table); cimports of header-only ``.pxd``
files, ``libc`` or ``cpython`` name no seglog module and are dropped like any outside import.
The ``.pxi`` parts a ``.pyx`` includes (codec.pyx's) hold no import or cimport of their own
(tests/twins/test_native_linking.py checks it), so the ``.pyx`` alone has every import of its
module.

An import is an edge from the importing module to the module it names:

- ``import a.b.c`` is an edge to ``a.b.c``; ``from a.b import c`` is an edge to ``a.b.c`` when
  ``c`` is a module, else to ``a.b`` (the package whose ``__init__`` defines ``c``).
- Relative imports are resolved to full names first.
- Only imports of seglog's own modules are edges. The parent packages Python initialises on the
  way (``a`` and ``a.b`` for ``import a.b.c``) are not edges, or every module would "import"
  ``seglog/__init__.py``; ``importlib.import_module`` calls are not edges either.

The rules (each a test below that lists every offender as ``file:line``):

1. No import cycle anywhere in ``src/seglog``.
2. ``seglog.storage`` loads no ``seglog.coordinator``, ``seglog.clients``, ``seglog.store`` or
   ``seglog.server``, directly or through another seglog module it imports (so
   ``from seglog import Log`` counts: ``seglog/__init__.py`` imports the store).
   The store's two rooms count as the store for these rules: ``seglog.log_manager`` (the
   partitions on disk) and ``seglog.store_coordinators`` (the coordinators' wiring) are
   loaded by no ``seglog.storage``, ``seglog.coordinator`` or ``seglog.clients`` module; the
   log manager loads no ``seglog.coordinator``, ``seglog.store_coordinators``, ``seglog.store``
   or client other than the partitioner; the coordinators' wiring no ``seglog.store``.
3. ``seglog.coordinator`` loads no ``seglog.clients``, ``seglog.store`` or ``seglog.server``;
   ``seglog.clients`` no ``seglog.coordinator``, ``seglog.store`` or ``seglog.server`` (the
   clients talk to the broker side through ``seglog.broker_api``); ``seglog.store`` no
   ``seglog.server``; the same way. The wire broker ``seglog.server`` imports no
   ``seglog.clients`` module itself (it serves Kafka clients over TCP, never through the
   embedded ones; it loads them only as the store's factories).
   The cluster layer (``seglog.cluster``, docs/cluster.md §2) sits between the store and the
   server: it loads no ``seglog.server`` and imports no ``seglog.clients`` module itself (it
   may load them through the store, as the server does); ``seglog.storage``,
   ``seglog.coordinator`` and ``seglog.store`` load no ``seglog.cluster``.
4. The leaves (:data:`LEAVES`) import only leaves.
5. No module reaches a private (``_name``, not a dunder) attribute of something another module
   defines. Three shapes are reported: ``from m import _name`` (``m`` another seglog module,
   ``_name`` not a module); ``m._name`` where ``m`` is a seglog module this module imported;
   ``x._name`` (and ``getattr``/``setattr``/``hasattr``/``delattr(x, "_name")``) where
   ``_name`` is defined nowhere in this module. "Defined here" means a ``def _name`` or
   ``class _name``, an assignment ``self._name = ...`` or ``cls._name = ...``, a class-body
   assignment or annotation (which covers NamedTuple and dataclass fields), a ``__slots__``
   entry, or a module-level assignment. NamedTuple's public ``_replace``, ``_asdict``,
   ``_fields``, ``_make`` are not private; standard-library privates the code needs are listed
   in :data:`ALLOWED_FOREIGN_PRIVATES`, each with its reason. A private *module*
   (``seglog._backend``, ``seglog._native``) is package-internal and may be imported by any
   seglog module. The ``.pyx`` sources are checked for the first shape only.
6. A backend is reached through ``seglog._backend``: ``seglog.pure`` and ``seglog._native``
   are imported only from inside themselves (a twin never imports the other twin either), so
   the Python layer never ties itself to one backend (house style, rule 3).
7. The rooms stay small (issue 22, "smaller rooms"): each file in :data:`LINE_BUDGETS` has at
   most its budget of lines, so the Store and the Log do not grow back into one class each.

The checker is plain functions over a directory so that the self-tests at the end can run it
on small synthetic packages and see each rule fail.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib
import re

import pytest

SRC_DIR = pathlib.Path(__file__).resolve().parent.parent / "src"
ROOT_PACKAGE = "seglog"

# Modules that import only each other: value types, errors, Kafka's error codes and its config
# table (with the page written from it), the format constants, codecs of compressed payloads,
# file names, the backend switch and the backend contract.
LEAVES = frozenset(f"{ROOT_PACKAGE}.{name}" for name in (
    "errors", "error_codes", "format", "compression", "filenames", "results", "types",
    "_backend", "_contract", "configdef", "config_table", "config_docs", "group_configs",
))

# The Store's two rooms (seglog.store's docstring): the partitions on disk, then the wiring of
# the coordinators over them. Not under the ``seglog.store`` prefix, so named on their own.
LOG_MANAGER = f"{ROOT_PACKAGE}.log_manager"
STORE_COORDINATORS = f"{ROOT_PACKAGE}.store_coordinators"

# Rules 2 and 3: a package prefix and the prefixes it must never load.
FORBIDDEN_LOADS = {
    f"{ROOT_PACKAGE}.storage": (f"{ROOT_PACKAGE}.coordinator", f"{ROOT_PACKAGE}.clients",
                                f"{ROOT_PACKAGE}.store", f"{ROOT_PACKAGE}.server",
                                f"{ROOT_PACKAGE}.cluster", LOG_MANAGER, STORE_COORDINATORS,
                                f"{ROOT_PACKAGE}.topic_registry"),
    f"{ROOT_PACKAGE}.coordinator": (f"{ROOT_PACKAGE}.clients", f"{ROOT_PACKAGE}.store",
                                    f"{ROOT_PACKAGE}.server", f"{ROOT_PACKAGE}.cluster",
                                    LOG_MANAGER, STORE_COORDINATORS),
    # The clients reach the broker side only through seglog.broker_api's interface.
    f"{ROOT_PACKAGE}.clients": (f"{ROOT_PACKAGE}.coordinator", f"{ROOT_PACKAGE}.store",
                                f"{ROOT_PACKAGE}.server", LOG_MANAGER, STORE_COORDINATORS),
    # The partitions on disk know nothing of groups, transactions or the store; their Topic's
    # partitioner is the clients' (seglog.clients.partitioner, which loads nothing of seglog).
    LOG_MANAGER: (f"{ROOT_PACKAGE}.coordinator", f"{ROOT_PACKAGE}.store",
                  f"{ROOT_PACKAGE}.server", f"{ROOT_PACKAGE}.cluster",
                  f"{ROOT_PACKAGE}.clients.producer", f"{ROOT_PACKAGE}.clients.consumer",
                  STORE_COORDINATORS),
    # The registry file of the log manager: a format, over storage's checkpoints only.
    f"{ROOT_PACKAGE}.topic_registry": (f"{ROOT_PACKAGE}.coordinator", f"{ROOT_PACKAGE}.clients",
                                       f"{ROOT_PACKAGE}.store", f"{ROOT_PACKAGE}.server",
                                       f"{ROOT_PACKAGE}.cluster", LOG_MANAGER,
                                       STORE_COORDINATORS),
    # The coordinators' wiring sits under the store that makes it.
    STORE_COORDINATORS: (f"{ROOT_PACKAGE}.store", f"{ROOT_PACKAGE}.server",
                         f"{ROOT_PACKAGE}.cluster", f"{ROOT_PACKAGE}.clients.producer",
                         f"{ROOT_PACKAGE}.clients.consumer"),
    # The wire broker sits on top: nothing below loads it. (It loads the store, and the
    # store its embedded clients' factories, so "the server never loads the clients" is not
    # a rule; that the server never *imports* them is: FORBIDDEN_IMPORTS.)
    f"{ROOT_PACKAGE}.store": (f"{ROOT_PACKAGE}.server", f"{ROOT_PACKAGE}.cluster"),
    # The cluster layer (replication with ZooKeeper) sits between the store and the server.
    f"{ROOT_PACKAGE}.cluster": (f"{ROOT_PACKAGE}.server",),
}

# Rule 3, direct imports only: a package prefix and the prefixes its modules must never
# import themselves (they may load them through the store, which hands out the clients).
FORBIDDEN_IMPORTS = {
    f"{ROOT_PACKAGE}.server": (f"{ROOT_PACKAGE}.clients",),
    f"{ROOT_PACKAGE}.cluster": (f"{ROOT_PACKAGE}.clients",),
}

# Rule 7: files (relative to src/seglog) and the most lines each may have. store.py was 1,635
# lines and storage/log.py 1,199 before issue 22 split them by responsibility; a change that
# needs more room moves a cohesive piece into a module of its own instead of raising these.
LINE_BUDGETS = {
    "store.py": 800,
    "storage/log.py": 800,
    "log_manager.py": 1000,
    "store_coordinators.py": 400,
}

# Rule 6: the twins, each importable only from inside itself.
BACKEND_PACKAGES = (f"{ROOT_PACKAGE}.pure", f"{ROOT_PACKAGE}._native")

# NamedTuple's public API starts with an underscore so that it cannot clash with field names.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

# Standard-library privates the code uses on purpose, as ``expression.attribute`` -> why.
# test_allowed_foreign_privates_are_all_used keeps this list from going stale.
# None is needed today; an entry looks like ``"os._exit": "a forked child skips atexit"``.
ALLOWED_FOREIGN_PRIVATES: dict[str, str] = {}

_REACH_BUILTINS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


@dataclasses.dataclass(frozen=True)
class Module:
    """One module of the tree: its full name, its source file, and whether it is Cython."""

    name: str
    path: pathlib.Path
    is_package: bool
    is_cython: bool


@dataclasses.dataclass(frozen=True)
class Import:
    """One import edge: ``source`` imports ``target`` at ``path:line``. ``private_name`` is the
    ``_name`` of a ``from target import _name`` whose name is not a module."""

    source: str
    target: str
    path: pathlib.Path
    line: int
    private_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Offence:
    """A rule broken at ``path:line``, said in ``text``."""

    path: pathlib.Path
    line: int
    text: str

    def format(self, base: pathlib.Path) -> str:
        """``file:line: text`` with ``file`` relative to ``base`` when it is under it."""
        try:
            shown = self.path.relative_to(base)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: {self.text}"


@dataclasses.dataclass
class Tree:
    """The modules of one package tree, their parsed sources and their import edges."""

    base: pathlib.Path
    modules: dict[str, Module]
    syntax: dict[str, ast.Module]
    imports: list[Import]

    def edges(self) -> dict[str, set[str]]:
        """The import graph: module name -> the names of the modules it imports."""
        graph: dict[str, set[str]] = {name: set() for name in self.modules}
        for imp in self.imports:
            if imp.target in self.modules and imp.target != imp.source:
                graph[imp.source].add(imp.target)
        return graph


def discover(src_dir: pathlib.Path, root: str = ROOT_PACKAGE) -> dict[str, Module]:
    """Every module under ``src_dir/root``: the ``.py`` files, and each
    ``src_dir/_native/<name>.pyx`` as ``<root>._native.<name>`` (setup.py builds them so)."""
    modules: dict[str, Module] = {}
    package_dir = src_dir / root
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(src_dir).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, path, is_package, is_cython=False)
    for path in sorted((src_dir / "_native").glob("*.pyx")):
        name = f"{root}._native.{path.stem}"
        modules[name] = Module(name, path, is_package=False, is_cython=True)
    return modules


# An import statement inside Cython source: ``[c]import a.b [as c], ...`` or
# ``from x [c]import names`` (parenthesised names may span lines).
_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:c?import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*"
    r"|from[ \t]+\.*[\w.]*[ \t]+c?import[ \t]+(?:\([^)]*\)|[^\n]*))[ \t]*$",
    re.M,
)
_CIMPORT = re.compile(r"\bcimport\b")


def parse_cython_imports(text: str) -> ast.Module:
    """The import and cimport statements of a ``.pyx`` source as one parsed module (a cimport
    read as an import), each at its line number in the source. A statement the pattern cuts out that is not Python raises
    SyntaxError, so no import is skipped quietly."""
    body: list[ast.stmt] = []
    for match in _PYX_IMPORT.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        statement = ast.parse(_CIMPORT.sub("import", match.group(0).strip(), count=1)).body[0]
        for node in ast.walk(statement):
            if hasattr(node, "lineno"):
                node.lineno += line - 1
                node.end_lineno = (node.end_lineno or node.lineno) + line - 1
        body.append(statement)
    return ast.Module(body=body, type_ignores=[])


def _resolve_from(module: Module, node: ast.ImportFrom) -> str:
    """The full name of the module a ``from ... import`` statement names."""
    if not node.level:
        return node.module or ""
    parts = module.name.split(".")
    if not module.is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def _in_root(name: str, root: str) -> bool:
    return name == root or name.startswith(root + ".")


def load_tree(src_dir: pathlib.Path, root: str = ROOT_PACKAGE) -> Tree:
    """Parse every module of ``src_dir/root`` and collect its import edges into seglog."""
    modules = discover(src_dir, root)
    syntax: dict[str, ast.Module] = {}
    imports: list[Import] = []
    for module in modules.values():
        text = module.path.read_text()
        tree = parse_cython_imports(text) if module.is_cython else ast.parse(text, str(module.path))
        syntax[module.name] = tree
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _in_root(alias.name, root):
                        imports.append(Import(module.name, alias.name, module.path, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(module, node)
                if not _in_root(base, root):
                    continue
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    if submodule in modules:
                        imports.append(Import(module.name, submodule, module.path, node.lineno))
                        continue
                    private = alias.name if _is_private(alias.name) else None
                    imports.append(Import(module.name, base, module.path, node.lineno, private))
    # ``from m import (a, b)`` is one edge, not one per name (a private name keeps its own).
    return Tree(src_dir, modules, syntax, list(dict.fromkeys(imports)))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# ----------------------------------------------------------------------------- rule 1: cycles


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one node, each
    sorted, iteratively (no recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _shortest_cycle(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest cycle through the first member of a component: ``[a, b, ..., a]``."""
    start = min(members)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its own component")


def find_cycles(tree: Tree) -> list[str]:
    """One message per import cycle: the shortest cycle path, then every import statement
    between the component's modules (each of them is on some cycle)."""
    graph = tree.edges()
    messages = []
    for component in strongly_connected(graph):
        members = set(component)
        path = _shortest_cycle(graph, members)
        lines = [f"cycle: {' -> '.join(path)}"]
        for imp in sorted(tree.imports, key=lambda i: (str(i.path), i.line, i.target)):
            if imp.source in members and imp.target in members and imp.source != imp.target:
                offence = Offence(imp.path, imp.line, f"{imp.source} imports {imp.target}")
                lines.append("    " + offence.format(tree.base))
        messages.append("\n".join(lines))
    return messages


# ----------------------------------------------------------------- rules 2-4: who imports whom


def _loads(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module importing ``start`` loads, each with the import path that reaches it."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    return paths


def find_forbidden_loads(tree: Tree, package: str, forbidden: tuple[str, ...]) -> list[Offence]:
    """Each import in ``package`` whose target is, or loads, a module under ``forbidden``."""
    graph = tree.edges()
    offences = []
    for imp in tree.imports:
        if not _in_root(imp.source, package) or imp.target not in tree.modules:
            continue
        for reached, path in _loads(graph, imp.target).items():
            if any(_in_root(reached, name) for name in forbidden):
                how = "" if len(path) == 1 else f" (through {' -> '.join(path)})"
                offences.append(Offence(imp.path, imp.line,
                                        f"{imp.source} imports {imp.target}, loading {reached}{how}"))
                break
    return offences


def find_forbidden_imports(tree: Tree, package: str, forbidden: tuple[str, ...]) -> list[Offence]:
    """Each import in ``package`` whose target itself is under ``forbidden`` (what the target
    loads in turn does not count: see :func:`find_forbidden_loads` for that)."""
    return [Offence(imp.path, imp.line, f"{imp.source} imports {imp.target}")
            for imp in tree.imports
            if _in_root(imp.source, package)
            and any(_in_root(imp.target, name) for name in forbidden)]


def find_leaf_offences(tree: Tree, leaves: frozenset[str] = LEAVES) -> list[Offence]:
    """Each import in a leaf module of a module that is not a leaf."""
    return [Offence(imp.path, imp.line, f"leaf {imp.source} imports {imp.target}, not a leaf")
            for imp in tree.imports
            if imp.source in leaves and imp.target != imp.source and imp.target not in leaves]


def find_backend_bypasses(tree: Tree,
                          backends: tuple[str, ...] = BACKEND_PACKAGES) -> list[Offence]:
    """Each import of a module of one of ``backends`` from outside that package."""
    offences = []
    for imp in tree.imports:
        for backend in backends:
            if _in_root(imp.target, backend) and not _in_root(imp.source, backend):
                offences.append(Offence(imp.path, imp.line, (
                    f"{imp.source} imports {imp.target}: a backend is reached through "
                    f"get_backend()")))
    return offences


# ------------------------------------------------------------------ rule 5: private reach


def _defined_privates(syntax: ast.Module) -> set[str]:
    """The ``_names`` this module defines as attributes (see the module docstring)."""
    names: set[str] = set()

    def targets_of(node: ast.AST) -> list[ast.expr]:
        if isinstance(node, ast.Assign):
            return node.targets
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            return [node.target]
        return []

    def add_target(target: ast.expr, *, in_scope: bool) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                add_target(element, in_scope=in_scope)
        elif isinstance(target, ast.Name) and in_scope:
            names.add(target.id)
        elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
              and target.value.id in ("self", "cls")):
            names.add(target.attr)

    scopes = [syntax, *(n for n in ast.walk(syntax) if isinstance(n, ast.ClassDef))]
    for scope in scopes:
        for statement in scope.body:
            for target in targets_of(statement):
                add_target(target, in_scope=True)
                if isinstance(target, ast.Name) and target.id == "__slots__":
                    value = statement.value
                    for element in getattr(value, "elts", []):
                        if isinstance(element, ast.Constant) and isinstance(element.value, str):
                            names.add(element.value)
    for node in ast.walk(syntax):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in targets_of(node):
            add_target(target, in_scope=False)
    return {name for name in names if _is_private(name)}


def _module_bindings(tree: Tree, module: str) -> dict[str, str]:
    """Local name -> seglog module, for every import in ``module`` that binds a module."""
    bound: dict[str, str] = {}
    info = tree.modules[module]
    for node in ast.walk(tree.syntax[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in tree.modules:
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(info, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in tree.modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    return bound


def find_private_reaches(tree: Tree,
                         allowed: dict[str, str] = ALLOWED_FOREIGN_PRIVATES) -> list[Offence]:
    """Every reach into another module's privates (rule 5), in file order."""
    offences = [
        Offence(imp.path, imp.line, f"from {imp.target} import {imp.private_name}")
        for imp in tree.imports
        if imp.private_name is not None and imp.target != imp.source
    ]
    for name, info in tree.modules.items():
        if info.is_cython:
            continue
        defined = _defined_privates(tree.syntax[name])
        bound = _module_bindings(tree, name)

        def module_of(node: ast.expr) -> str | None:
            # The seglog module an expression names (``m`` or ``seglog.storage.log``), or None.
            if isinstance(node, ast.Name):
                return bound.get(node.id)
            if isinstance(node, ast.Attribute):
                parent = module_of(node.value)
                if parent is not None and f"{parent}.{node.attr}" in tree.modules:
                    return f"{parent}.{node.attr}"
            return None

        for node in ast.walk(tree.syntax[name]):
            if isinstance(node, ast.Attribute):
                owner_expr, attr = node.value, node.attr
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in _REACH_BUILTINS and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                owner_expr, attr = node.args[0], node.args[1].value
            else:
                continue
            if not _is_private(attr) or attr in NAMEDTUPLE_API:
                continue
            owner_module = module_of(owner_expr)
            shown = f"{ast.unparse(owner_expr)}.{attr}"
            if owner_module is not None:
                if owner_module != name and f"{owner_module}.{attr}" not in tree.modules:
                    offences.append(Offence(info.path, node.lineno,
                                            f"{shown}: a private name of {owner_module}"))
            elif attr not in defined and shown not in allowed:
                offences.append(Offence(info.path, node.lineno,
                                        f"{shown}: {attr} is not defined in {name}"))
    return sorted(offences, key=lambda o: (str(o.path), o.line, o.text))


# ----------------------------------------------------------------------- the rules, on src/


@functools.lru_cache(maxsize=1)
def project_tree() -> Tree:
    """The parsed ``src/seglog`` (once per test session)."""
    return load_tree(SRC_DIR)


def _report(offences: list[Offence], base: pathlib.Path) -> str:
    return "\n".join(offence.format(base) for offence in offences)


def test_checker_sees_the_whole_tree():
    tree = project_tree()
    for name in ("seglog", "seglog.storage.log", "seglog.store", "seglog.clients.producer",
                 "seglog.coordinator.transaction", "seglog.pure.segment", "seglog._native",
                 "seglog._native.segment", "seglog.bench.runner"):
        assert name in tree.modules, name
    graph = tree.edges()
    assert "seglog.storage.log" in graph["seglog"]
    assert "seglog.errors" in graph["seglog._native.segment"]  # read from the .pyx


def test_no_import_cycle():
    cycles = find_cycles(project_tree())
    assert not cycles, f"{len(cycles)} import cycle(s) in src/seglog:\n" + "\n".join(cycles)


@pytest.mark.parametrize("package", sorted(FORBIDDEN_LOADS))
def test_layer_loads_nothing_above_it(package):
    tree = project_tree()
    offences = find_forbidden_loads(tree, package, FORBIDDEN_LOADS[package])
    assert not offences, (f"{package} must not load {', '.join(FORBIDDEN_LOADS[package])}:\n"
                          + _report(offences, tree.base))


@pytest.mark.parametrize("package", sorted(FORBIDDEN_IMPORTS))
def test_layer_imports_nothing_forbidden_itself(package):
    tree = project_tree()
    offences = find_forbidden_imports(tree, package, FORBIDDEN_IMPORTS[package])
    assert not offences, (f"{package} must not import {', '.join(FORBIDDEN_IMPORTS[package])}:\n"
                          + _report(offences, tree.base))


def test_leaves_import_only_leaves():
    tree = project_tree()
    offences = find_leaf_offences(tree)
    assert not offences, "leaf modules importing non-leaves:\n" + _report(offences, tree.base)


def test_backends_are_reached_through_get_backend():
    tree = project_tree()
    offences = find_backend_bypasses(tree)
    assert not offences, ("imports of a backend's modules from outside it:\n"
                          + _report(offences, tree.base))


def test_no_private_reach_across_modules():
    tree = project_tree()
    offences = find_private_reaches(tree)
    assert not offences, (f"{len(offences)} reach(es) into another module's privates:\n"
                          + _report(offences, tree.base))


def find_over_budget(package_dir: pathlib.Path, budgets: dict[str, int]) -> list[str]:
    """``file: N lines, budget M`` for each file of ``budgets`` (relative to ``package_dir``)
    longer than its budget; a missing file is reported too (a budget must not outlive it)."""
    messages = []
    for relative, budget in sorted(budgets.items()):
        path = package_dir / relative
        if not path.is_file():
            messages.append(f"{relative}: missing (remove its budget)")
            continue
        lines = len(path.read_text().splitlines())
        if lines > budget:
            messages.append(f"{relative}: {lines} lines, budget {budget}")
    return messages


def test_rooms_stay_within_their_line_budgets():
    over = find_over_budget(SRC_DIR / ROOT_PACKAGE, LINE_BUDGETS)
    assert not over, ("files over their line budget (move a cohesive piece into a module of "
                      "its own):\n" + "\n".join(over))


def test_self_reports_a_file_over_its_budget_and_a_missing_one(tmp_path):
    (tmp_path / "big.py").write_text("x = 1\n" * 11)
    (tmp_path / "small.py").write_text("x = 1\n" * 10)
    assert find_over_budget(tmp_path, {"big.py": 10, "small.py": 10, "gone.py": 5}) == [
        "big.py: 11 lines, budget 10", "gone.py: missing (remove its budget)"]


def test_allowed_foreign_privates_are_all_used():
    # An allowlist entry nobody needs any more would hide the next real use of that name.
    tree = project_tree()
    used = {f"{ast.unparse(node.value)}.{node.attr}"
            for name, info in tree.modules.items() if not info.is_cython
            for node in ast.walk(tree.syntax[name]) if isinstance(node, ast.Attribute)}
    assert set(ALLOWED_FOREIGN_PRIVATES) <= used, set(ALLOWED_FOREIGN_PRIVATES) - used


# ----------------------------------------------- self-tests: each rule fails on a real violation


def _write_package(tmp_path: pathlib.Path, files: dict[str, str]) -> Tree:
    """A package ``pkg`` under ``tmp_path`` from ``{relative path: source}``; ``.pyx`` paths go
    to ``tmp_path/_native`` as ``pkg._native.<name>``."""
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_tree(tmp_path, "pkg")


def test_self_reports_a_cycle_through_function_level_and_relative_imports(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def f():\n    from .sub.c import thing\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "import pkg.a\n",
        "pkg/d.py": "from pkg import a\n",
    })
    cycles = find_cycles(tree)
    assert len(cycles) == 1
    assert cycles[0].splitlines()[0] == "cycle: pkg.a -> pkg.b -> pkg.sub.c -> pkg.a"
    assert "pkg/b.py:2: pkg.b imports pkg.sub.c" in cycles[0]
    assert "pkg/d.py" not in cycles[0]


def test_self_reports_a_package_init_importing_its_submodule_that_imports_it(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "from .log import Log\n",
        "pkg/log.py": "from pkg import Thing\n",
    })
    cycles = find_cycles(tree)
    assert len(cycles) == 1 and "cycle: pkg -> pkg.log -> pkg" in cycles[0]


def test_self_reports_a_cycle_through_cython_imports(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/_native/__init__.py": "from .seg import Segment\n",
        "pkg/leaf.py": "import pkg._native\n",
        "_native/seg.pyx": ("from libc.stdint cimport int64_t\n"
                            "from posix.unistd cimport (\n    pread,\n)\n"
                            '"""from a to b, import this"""\n'
                            "from pkg.leaf import (\n    X,\n    Y,\n)\n"
                            "cimport cython\n"
                            "from _bigendian cimport load_i32\n"
                            "from pkg._native.idx cimport lookup\n"
                            "cdef class Segment:\n    pass\n"),
        "_native/idx.pyx": "",
    })
    assert tree.edges()["pkg._native.seg"] == {"pkg.leaf", "pkg._native.idx"}
    assert [imp.line for imp in tree.imports if imp.source == "pkg._native.seg"] == [6, 12]
    assert find_cycles(tree)[0].startswith("cycle: pkg._native -> pkg._native.seg -> pkg.leaf")


def test_self_reports_forbidden_loads_direct_and_through_the_top_level_init(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "from .store import Store\n",
        "pkg/store.py": "",
        "pkg/errors.py": "",
        "pkg/storage/__init__.py": "",
        "pkg/storage/log.py": "from .. import errors\nfrom pkg import Store\n",
        "pkg/storage/cleaner.py": "def f():\n    import pkg.coordinator.group\n",
        "pkg/storage/typed.py": ("from typing import TYPE_CHECKING\n"
                                 "if TYPE_CHECKING:\n    from ..clients.consumer import Consumer\n"),
        "pkg/coordinator/__init__.py": "",
        "pkg/coordinator/group.py": "from pkg.clients.consumer import Consumer\n",
        "pkg/clients/__init__.py": "",
        "pkg/clients/consumer.py": "",
    })
    storage = find_forbidden_loads(tree, "pkg.storage", ("pkg.coordinator", "pkg.clients", "pkg.store"))
    assert [(o.path.name, o.line) for o in storage] == [
        ("cleaner.py", 2), ("log.py", 2), ("typed.py", 3)]
    assert "loading pkg.store (through pkg -> pkg.store)" in storage[1].text
    coordinator = find_forbidden_loads(tree, "pkg.coordinator", ("pkg.clients", "pkg.store"))
    assert [(o.path.name, o.line) for o in coordinator] == [("group.py", 1)]


def test_self_reports_the_cluster_layer_rules(tmp_path):
    # The cluster layer: it may load the clients through the store (as the server does) but
    # never import them itself, never load the server; the store never loads the cluster.
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/store.py": "from pkg.clients.producer import Producer\n",
        "pkg/clients/__init__.py": "",
        "pkg/clients/producer.py": "",
        "pkg/server/__init__.py": "",
        "pkg/server/broker.py": "from pkg.cluster import zk_client\n",
        "pkg/cluster/__init__.py": "",
        "pkg/cluster/zk_client.py": "import pkg.store\n",
        "pkg/cluster/fetcher.py": ("from pkg.clients import producer\n"
                                   "def f():\n    from ..server import broker\n"),
        "pkg/storage/__init__.py": "",
        "pkg/storage/log.py": "def f():\n    import pkg.cluster.zk_client\n",
    })
    imports = find_forbidden_imports(tree, "pkg.cluster", ("pkg.clients",))
    assert [(o.path.name, o.line, o.text) for o in imports] == [
        ("fetcher.py", 1, "pkg.cluster.fetcher imports pkg.clients.producer")]
    loads = find_forbidden_loads(tree, "pkg.cluster", ("pkg.server",))
    assert [(o.path.name, o.line) for o in loads] == [("fetcher.py", 3)]
    storage = find_forbidden_loads(tree, "pkg.storage", ("pkg.cluster",))
    assert [(o.path.name, o.line) for o in storage] == [("log.py", 2)]
    assert find_forbidden_loads(tree, "pkg.store", ("pkg.cluster",)) == []


def test_self_reports_a_leaf_importing_a_non_leaf(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/errors.py": "",
        "pkg/format.py": "from .errors import E\nfrom .storage import log\n",
        "pkg/storage/__init__.py": "",
        "pkg/storage/log.py": "",
    })
    offences = find_leaf_offences(tree, frozenset({"pkg.errors", "pkg.format"}))
    assert [(o.path.name, o.line, o.text) for o in offences] == [
        ("format.py", 2, "leaf pkg.format imports pkg.storage.log, not a leaf")]


def test_self_reports_a_backend_imported_from_outside_it(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/pure/__init__.py": "from .varint import encode_varint\n",
        "pkg/pure/varint.py": "import pkg._native.codec\n",
        "pkg/_native/__init__.py": "from .codec import Batch\n",
        "pkg/storage/__init__.py": "",
        "pkg/storage/cleaner.py": "from ..pure.varint import encode_varint\n",
        "_native/codec.pyx": "from pkg._native import segment\n",
        "_native/segment.pyx": "",
    })
    offences = find_backend_bypasses(tree, ("pkg.pure", "pkg._native"))
    assert sorted((o.path.name, o.line) for o in offences) == [("cleaner.py", 1), ("varint.py", 1)]


def test_self_reports_each_shape_of_private_reach(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/other.py": "_SECRET = 1\ndef _helper():\n    pass\n",
        "pkg/user.py": (
            "from pkg.other import _helper\n"                  # 1: private name imported
            "from pkg import other\n"
            "import pkg.other as o\n"
            "def f(log, store):\n"
            "    other._SECRET\n"                               # 5: m._name
            "    o._helper()\n"                                 # 6: m._name through an alias
            "    log._lock.acquire()\n"                         # 7: obj._name not defined here
            "    store._topics['a'] = 1\n"                      # 8: the same, stored into
            "    getattr(log, '_txn_index', None)\n"            # 9: the same, by getattr
            "    log._replace(x=1)\n"                           # NamedTuple API: fine
            "    log.__class__\n"                               # dunder: fine
        ),
        "_native/seg.pyx": "from pkg.other import _SECRET\n",
    })
    offences = find_private_reaches(tree, allowed={})
    assert [(o.path.name, o.line) for o in offences] == [
        ("seg.pyx", 1), ("user.py", 1), ("user.py", 5), ("user.py", 6), ("user.py", 7),
        ("user.py", 8), ("user.py", 9)]
    assert offences[4].text == "log._lock: _lock is not defined in pkg.user"


def test_self_accepts_privates_the_module_defines_itself(tmp_path):
    tree = _write_package(tmp_path, {
        "pkg/__init__.py": "from . import _backend\n",
        "pkg/_backend.py": "",
        "pkg/own.py": (
            "import os\n"
            "import typing\n"
            "from pkg import _backend\n"                        # a private module: fine
            "import pkg._backend\n"
            "_CACHE = {}\n"
            "class Point(typing.NamedTuple):\n"
            "    _x: int\n"
            "class Box:\n"
            "    __slots__ = ('_slot',)\n"
            "    _default = 0\n"
            "    def __init__(self):\n"
            "        self._lock = None\n"
            "    @classmethod\n"
            "    def make(cls):\n"
            "        cls._made = True\n"
            "    def _check(self):\n"
            "        pass\n"
            "def f(a, b, p):\n"
            "    a._lock, b._check(), p._x, a._slot, a._default, a._made, a._CACHE\n"
            "    pkg._backend, _backend.__name__\n"
            "    os._exit(0)\n"
        ),
    })
    assert find_private_reaches(tree, allowed={"os._exit": "why"}) == []
    assert [o.text for o in find_private_reaches(tree, allowed={})] == [
        "os._exit: _exit is not defined in pkg.own"]


# --- one broker path (issue 22): a lone broker is a cluster of one ------------------------------

#: How a handler would ask which mode it runs in: nothing in server/apis may (the two kinds of
#: cluster differ only inside the seam's two classes, cluster/single.py and
#: cluster/replica_manager.py).
_MODE_BRANCH = re.compile(
    r"\bcluster is (not )?None\b|\breplica_manager\s*\(|CLUSTER_EXTENSION|leadership_moves"
    r"|\bSingleBroker\b|\bReplicaManager\b|zookeeper\.connect\b|cluster_mode\b")


def test_no_handler_branches_on_the_mode():
    apis = SRC_DIR / ROOT_PACKAGE / "server" / "apis"
    found = {}
    for path in sorted(apis.glob("*.py")):
        code = _code_only(path.read_text(encoding="utf-8"))
        hits = [m.group(0) for m in _MODE_BRANCH.finditer(code)]
        if hits:
            found[path.name] = hits
    assert found == {}, f"handlers that ask which mode they run in: {found}"


def _code_only(source: str) -> str:
    """``source`` without its comments and strings (docstrings may name the modes)."""
    import io
    import tokenize

    kept = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.STRING):
            kept.append(token.string)
    return " ".join(kept)


def test_the_mode_branch_check_sees_a_branch():
    assert _MODE_BRANCH.search(_code_only("if cluster is None:\n    pass\n"))
    assert _MODE_BRANCH.search(_code_only("rm = replica_manager(broker)\n"))
    assert _APPEND_PRIMITIVES.search(_code_only("cluster.after_leader_append(replica)\n"))
    assert not _MODE_BRANCH.search(_code_only('"""a cluster is None here"""\n'))


#: The seam's primitives under its one append (PartitionSeam.append_now / append /
#: try_complete_acks / wait_for_acks): only the seam and its two classes may call them, so
#: every writer (Produce, the group and transaction coordinators' records, the markers) goes
#: through the one append.
_APPEND_PRIMITIVES = re.compile(
    r"\.\s*(after_leader_append|check_acks_all_before_append|wait_acks_all|acks_all_status)"
    r"\s*\(")
_SEAM_FILES = {"cluster/seam.py", "cluster/single.py", "cluster/replica_manager.py"}


def test_every_writer_goes_through_the_one_append():
    package = SRC_DIR / ROOT_PACKAGE
    found = {}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name in _SEAM_FILES:
            continue
        hits = _APPEND_PRIMITIVES.findall(_code_only(path.read_text(encoding="utf-8")))
        if hits:
            found[name] = hits
    assert found == {}, f"appends around the seam's one append: {found}"
