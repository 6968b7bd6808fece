"""Mutation testing: does the default sweep (and the module's own tests) notice a one-point change to a core?

A mutant is the source of one module with one small change: a comparison flipped (``<`` to
``<=``, ``==`` to ``!=``), ``+`` swapped with ``-``, an int constant moved by one, ``True``
swapped with ``False``, ``and`` with ``or``, ``min`` with ``max``, a condition negated, a
statement removed, a ``bool`` function's answer inverted. The working tree is never touched:
the run copies the code, tests and tools to a temporary folder first (``frozen_tree``) and judges
that copy, so editing the tree during an hour-long run changes nothing it sees. Each mutant is
written to a temporary file, and the child process that judges it installs an import hook
(``_MutantFinder``) that loads that file under the module's own name, before anything imports
``conveyor``. The child reports whether the hook was used, so a mutant the run never imported
is reported as such, not as a survivor.

For each mutant it reports:

* **sweep**: ``conveyor simulate all`` with its defaults (whatever they are today), in a
  subprocess with a time bound; a failing run (exit status 1), a crash, or running past the bound
  (4 times the real code's time, plus 30 s) kill the mutant. The output is read as it comes, and
  the first ``FAILED`` line ends the run.
* **tests**: ``pytest -x -m "not slow"`` on the mutated module's package test directory
  (``actors/broker/_entries.py`` -> ``tests/actors/broker``), a fast relevant subset of ``make
  test`` rather than all of it; ``--tests quick`` runs only the module's own test file
  (``tests/actors/broker/test_entries.py``) where there is one, ``--tests none`` no tests.

Mutants listed in ``mutants_equivalent.py`` (each with why it cannot change what the code does)
are not run; those listed there as unreachable (code no simulated system runs) are judged by the
tests alone. The score is the sweep's kills over the mutants that are neither; a second score
counts the unreachable ones as survivors.

What is not mutated, and why: docstrings, annotations, decorators, imports, f-strings, ``assert``
statements and logging (they state or report, they do not decide), ``__repr__`` / ``__str__``,
``if TYPE_CHECKING`` blocks, and input validation: guard clauses that only raise on bad input (an
``if`` whose body is a ``raise``, after assignments that build its message) and calls of checking
functions (``_check_tag(tag)``). The simulator drives the actors with well-formed messages, so
input validation is the unit tests' job, and counting those mutants against the sweep would
measure the wrong thing.

    python tools/mutants.py                      # the default sample (120), with progress and a summary
    python tools/mutants.py --count 200 --seed 0 # another deterministic sample
    python tools/mutants.py --list               # every mutant of the sample, not run
    python tools/mutants.py --only ID [ID ...]   # run chosen mutants (ids as --list prints them)
    python tools/mutants.py --count 0            # every mutant of every module (about 3,000: days)

``make mutants [MUTANTS=120] [SEED=17] [TESTS=package]`` runs a sample; ``make test-slow`` runs a
small one (``tests/test_mutants.py``); CI runs neither.
"""

from __future__ import annotations

import argparse
import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import random
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"runtime": "conveyor.runtime", "actors": "conveyor.actors", "simulation": "conveyor.simulation",
           "cli": "conveyor.cli", "benchmarks": "conveyor.benchmarks"}
"""Each top-level code folder and the package pyproject maps it to (as in tools/layers.py)."""

MODULES = (
    "actors/broker/_entries.py",
    "actors/broker/_consumer_lists.py",
    "actors/broker/_consumer.py",
    "actors/broker/_queue.py",
    "actors/subscriber/_leases.py",
    "actors/subscriber/_flow.py",
    "actors/subscriber/_ordering.py",
    "actors/subscriber/_ledger.py",
    "actors/pubsub/_ackid.py",
    "actors/pubsub/_subscription.py",
    "runtime/_cell.py",
    "runtime/_supervision.py",
)
"""The cores and actor shells sampled by default (broker, subscriber, Pub/Sub front, the kernel's cell and
supervision): each owns rules the sweep must guard."""

COUNT = 120
"""Mutants drawn by default, spread evenly over the modules: about an hour on one core."""

SEED = 17
"""Fixes the sample, so two runs of the same code judge the same mutants."""

TEST_MODES = ("package", "quick", "none")
"""The tests side: the mutated module's package test directory, its own test file, or no tests."""

CHILD = "--child"
HOOKED = "conveyor-mutant: loaded "
"""What the child prints (on stderr) when the mutated module was imported through the hook."""

LOGGING_NAMES = frozenset({"log", "logger", "logging", "_log", "_logger", "warnings"})
ATTRS_FLAGS = frozenset({"eq", "repr", "hash", "order", "init", "slots", "frozen", "kw_only", "weakref_slot"})
"""Keyword flags of ``attrs.field`` / ``attrs.define``: how a value compares and prints, not what the code does."""
FUNCTIONS_LEFT_ALONE = frozenset({"__repr__", "__str__", "__rich_repr__", "__hash__"})

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_NEGATING = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
    ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.And: "and",
    ast.Or: "or",
}


# --- mutants --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    """One single-point change to one module.

    Attributes:
        path: the module's file, relative to the repository.
        ident: a stable name: path, enclosing function, operator, change and occurrence (``#n``
            counts the same change earlier in the same function), so it survives edits elsewhere.
        line: where the change is (1-based), for people.
        operator: ``compare``, ``arith``, ``constant``, ``boolean``, ``boolop``, ``minmax``,
            ``negate``, ``remove`` or ``return``.
        change: what becomes what, as source text.
        start, end: byte offsets of the replaced source.
        replacement: the source put there.
    """

    path: str
    ident: str
    line: int
    operator: str
    change: str
    start: int
    end: int
    replacement: str

    def source(self, original: bytes) -> bytes:
        """The mutated module's source."""
        return original[: self.start] + self.replacement.encode() + original[self.end :]


def module_name(path: str) -> str:
    """``actors/broker/_entries.py`` -> ``conveyor.actors.broker._entries`` (pyproject's package-dir)."""
    parts = Path(path).with_suffix("").parts
    return ".".join((FOLDERS[parts[0]], *parts[1:]))


def test_directory(path: str) -> str:
    """The mutated module's own tests: ``actors/broker/_entries.py`` -> ``tests/actors/broker``."""
    return str(Path("tests", *Path(path).parts[:-1]))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_guard(node: ast.If) -> bool:
    """An ``if`` that only raises (after building its message): input validation, left to the unit tests."""
    body = node.body
    return (isinstance(body[-1], ast.Raise) and all(isinstance(s, ast.Assign) for s in body[:-1])
            and not node.orelse)


def _is_validation(node: ast.expr) -> bool:
    """A call of a checking function (``_check_tag(tag)``, ``check_fault_plan(...)``): input validation too."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name.lstrip("_").startswith(("check", "validate"))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_logging(node: ast.expr) -> bool:
    """``log.debug(...)``, ``logging.warning(...)``, ``warnings.warn(...)``: reporting, not deciding."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in LOGGING_NAMES


def _returns_bool(node: ast.FunctionDef) -> bool:
    returns = node.returns
    return (isinstance(returns, ast.Name) and returns.id == "bool") or (
        isinstance(returns, ast.Constant) and returns.value == "bool"
    )


class _Sites(ast.NodeVisitor):
    """Walks a module and lists every mutation site outside the parts left alone (see the module docstring)."""

    def __init__(self, path: str, source: bytes) -> None:
        self.path = path
        self.source = source
        starts = [0]
        for line in source.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        self.line_starts = starts
        self.scope: list[str] = []
        self.in_function = 0
        self.bool_function: list[bool] = []
        self.found: list[Mutant] = []
        self.seen: Counter[tuple[str, str, str]] = Counter()

    # positions

    def _span(self, node: ast.AST) -> tuple[int, int]:
        start = self.line_starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        return start, end

    def _add(self, node: ast.AST, operator: str, change: str, replacement: str, *, statement: bool = False) -> None:
        start, end = self._span(node)
        lines = self.source[start:end].count(b"\n")
        # newlines keep every later line where it was
        text = replacement + "\n" * lines if statement else "(" + replacement + "\n" * lines + ")"
        qualname = ".".join(self.scope) or "<module>"
        key = (qualname, operator, change)
        self.seen[key] += 1
        ident = f"{self.path}:{qualname}:{operator}:{change}#{self.seen[key]}"
        self.found.append(Mutant(self.path, ident, node.lineno, operator, change, start, end, text))  # type: ignore[attr-defined]

    # structure: what is walked, what is left alone

    def visit_Import(self, node: ast.Import) -> None:
        return

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return

    def visit_Assert(self, node: ast.Assert) -> None:
        return

    def visit_Raise(self, node: ast.Raise) -> None:
        return

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return

    def _body(self, body: Sequence[ast.stmt]) -> None:
        for index, statement in enumerate(body):
            if index == 0 and _is_docstring(statement):
                continue
            self.visit(statement)

    def visit_Module(self, node: ast.Module) -> None:
        self._body(node.body)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self._body(node.body)
        self.scope.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in FUNCTIONS_LEFT_ALONE:
            return
        self.scope.append(node.name)
        self.in_function += 1
        self.bool_function.append(isinstance(node, ast.FunctionDef) and _returns_bool(node))
        for default in (*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            self.visit(default)
        self._body(node.body)
        self.bool_function.pop()
        self.in_function -= 1
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._removable(node)
            self.visit(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(isinstance(target, ast.Name) and target.id in ("__all__", "__slots__") for target in node.targets):
            return
        self._removable(node)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._removable(node)
        swapped = {ast.Add: ast.Sub, ast.Sub: ast.Add}.get(type(node.op))
        if swapped is not None:
            mutated = ast.AugAssign(node.target, swapped(), node.value)
            self._add(node, "arith", f"{_SYMBOLS[type(node.op)]}= -> {_SYMBOLS[swapped]}=",
                      ast.unparse(mutated), statement=True)
        self.visit(node.value)

    def visit_Expr(self, node: ast.Expr) -> None:
        if _is_logging(node.value) or _is_validation(node.value) or isinstance(node.value, ast.Constant):
            return  # reporting, validating, or an attribute's docstring
        self._removable(node)
        self.visit(node.value)

    def visit_Return(self, node: ast.Return) -> None:
        value = node.value
        if value is None:
            return
        self._removable(node)
        boolean = isinstance(value, ast.Constant) and isinstance(value.value, bool)
        if self.bool_function and self.bool_function[-1] and not boolean:
            self._add(node, "return", "return x -> return not x", f"return not ({ast.unparse(value)})",
                      statement=True)
        self.visit(value)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._removable(node)

    def visit_Break(self, node: ast.Break) -> None:
        self._removable(node)

    def visit_Continue(self, node: ast.Continue) -> None:
        self._removable(node)

    def _removable(self, node: ast.stmt) -> None:
        """Removing a statement means something only inside a function (at module level it is an import error)."""
        if self.in_function:
            first = ast.unparse(node).splitlines()[0]
            self._add(node, "remove", f"remove `{first[:60]}`", "pass", statement=True)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node):
            return
        if _is_guard(node):
            return
        self._negate(node.test)
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def visit_While(self, node: ast.While) -> None:
        self._negate(node.test)
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._negate(node.test)
        self.generic_visit(node)

    def _negate(self, test: ast.expr) -> None:
        """``if c`` -> ``if not c``, unless a compare mutant already negates it or ``not`` is removed instead."""
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], _NEGATING):
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return
        if isinstance(test, ast.Constant):
            return
        self._add(test, "negate", "c -> not c", f"not ({ast.unparse(test)})")

    # expressions

    def visit_Compare(self, node: ast.Compare) -> None:
        for index, op in enumerate(node.ops):
            swapped = _COMPARE_SWAPS.get(type(op))
            if swapped is None:
                continue
            ops = list(node.ops)
            ops[index] = swapped()
            self._add(node, "compare", f"{_SYMBOLS[type(op)]} -> {_SYMBOLS[swapped]}",
                      ast.unparse(ast.Compare(node.left, ops, node.comparators)))
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        swapped = {ast.Add: ast.Sub, ast.Sub: ast.Add}.get(type(node.op))
        strings = any(isinstance(side, (ast.JoinedStr, ast.Constant)) and isinstance(getattr(side, "value", ""), str)
                      for side in (node.left, node.right))
        if swapped is not None and not strings:
            self._add(node, "arith", f"{_SYMBOLS[type(node.op)]} -> {_SYMBOLS[swapped]}",
                      ast.unparse(ast.BinOp(node.left, swapped(), node.right)))
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        swapped = ast.Or if isinstance(node.op, ast.And) else ast.And
        self._add(node, "boolop", f"{_SYMBOLS[type(node.op)]} -> {_SYMBOLS[swapped]}",
                  ast.unparse(ast.BoolOp(swapped(), node.values)))
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._add(node, "negate", "not c -> c", ast.unparse(node.operand))
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg not in ATTRS_FLAGS:
            self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_logging(node):
            return
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("min", "max"):
            other = "max" if func.id == "min" else "min"
            self._add(node, "minmax", f"{func.id} -> {other}",
                      ast.unparse(ast.Call(ast.Name(other, ast.Load()), node.args, node.keywords)))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool):
            self._add(node, "boolean", f"{value} -> {not value}", repr(not value))
        elif isinstance(value, int):
            self._add(node, "constant", f"{value} -> {value + 1}", repr(value + 1))
            self._add(node, "constant", f"{value} -> {value - 1}", repr(value - 1))


def mutants_of(path: str, root: Path = ROOT) -> list[Mutant]:
    """Every mutant of the module at ``path`` (relative to ``root``), in source order.

    Each replacement is an unparsed AST node (parenthesised, or a whole statement padded with blank
    lines), so it compiles; ``judge`` compiles each again before it runs it, rather than every
    listing paying for some 3,000 compiles.
    """
    source = (root / path).read_bytes()
    sites = _Sites(path, source)
    sites.visit(ast.parse(source))
    return sites.found


def sample(paths: Sequence[str], count: int, seed: int, root: Path = ROOT) -> list[Mutant]:
    """``count`` mutants (all of them if 0), drawn with ``seed`` and spread evenly over the modules.

    Each module's mutants are shuffled with the seed and dealt in turns, one module after the
    other, so a small sample still touches every module; the result is in module and source order.
    """
    shuffled: list[list[Mutant]] = []
    for path in paths:
        every = mutants_of(path, root)
        random.Random(f"mutants:{seed}:{path}").shuffle(every)
        shuffled.append(every)
    if not count:
        picked = [mutant for every in shuffled for mutant in every]
    else:
        picked = []
        for turn in range(max((len(every) for every in shuffled), default=0)):
            picked.extend(every[turn] for every in shuffled if turn < len(every))
        picked = picked[:count]
    order = {path: index for index, path in enumerate(paths)}
    return sorted(picked, key=lambda mutant: (order[mutant.path], mutant.start, mutant.ident))


def equivalents() -> dict[str, str]:
    """The reviewed list of equivalent mutants: id -> why no run can tell it from the original."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from mutants_equivalent import EQUIVALENT
    finally:
        sys.path.pop(0)
    return dict(EQUIVALENT)


def unreachables() -> dict[str, str]:
    """The reviewed list of mutants in code no simulated system runs: id -> which code, and who does run it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from mutants_equivalent import UNREACHABLE
    finally:
        sys.path.pop(0)
    return dict(UNREACHABLE)


# --- the tree judged: a frozen copy ---------------------------------------------------------------------


@contextmanager
def frozen_tree() -> Iterator[Path]:
    """A copy of the code, the tests, the tools and pyproject in a temporary folder, removed afterwards.

    Every child runs there, with ``site/`` (the code folders linked as ``conveyor.*``) first on
    ``PYTHONPATH``, so it imports the copy before the editable install: editing the working tree
    while a long run goes on changes nothing that run judges, and the run never writes to the tree.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    with tempfile.TemporaryDirectory(prefix="conveyor-mutants-tree-") as folder:
        root = Path(folder)
        for name in ("tests", "tools", *FOLDERS):
            shutil.copytree(ROOT / name, root / name, ignore=ignore)
        shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
        package = root / "site" / "conveyor"
        package.mkdir(parents=True)
        for name in FOLDERS:
            (package / name).symlink_to(root / name, target_is_directory=True)
        yield root


# --- the child: the mutated module under its own name ---------------------------------------------------


class _MutantFinder(importlib.abc.MetaPathFinder):
    """Finds ``name`` in ``file`` instead of the installed tree; first on ``sys.meta_path``."""

    def __init__(self, name: str, file: str) -> None:
        self.name = name
        self.file = file
        self.used = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """The mutated file's spec for the mutated module's name; None (look elsewhere) for every other."""
        if fullname != self.name:
            return None
        self.used = True
        return importlib.util.spec_from_file_location(fullname, self.file)


def child(name: str, file: str, argv: Sequence[str]) -> int:
    """Run ``conveyor ...`` or ``pytest ...`` (``argv``) with ``name`` loaded from ``file``; its exit status."""
    finder = _MutantFinder(name, file)
    if name != "-":  # "-": the real code (the baseline run)
        sys.meta_path.insert(0, finder)
    code: int
    try:
        if argv[0] == "pytest":
            import pytest
            from hypothesis import settings

            # No deadline: on a loaded machine a slow example would "kill" a mutant it never saw.
            settings.register_profile("conveyor-mutants", deadline=None)
            settings.load_profile("conveyor-mutants")

            code = int(pytest.main(list(argv[1:])))
        else:
            from conveyor.cli import main

            sys.argv = ["conveyor", *argv[1:]]
            try:
                main()
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        if finder.used:
            print(f"{HOOKED}{name}", file=sys.stderr, flush=True)
    return code


# --- judging -----------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """How one run of one mutant ended."""

    killed: bool
    how: str  # failed, error, timeout, survived, not imported
    seconds: float
    detail: str = ""


@dataclass
class Outcome:
    """A mutant and what the sweep and the tests made of it."""

    mutant: Mutant
    sweep: Verdict | None = None
    tests: Verdict | None = None
    equivalent: str | None = None
    invalid: str | None = None
    shrunk: str | None = None
    unreachable: str | None = None


def _run(
    tree: Path, argv: Sequence[str], timeout: float, stop_at: tuple[str, ...] | None
) -> tuple[int | None, str, str, float]:
    """Run a child in ``tree``; stop it at the first stdout line starting with ``stop_at`` or at ``timeout``.

    Returns the exit status (None when stopped or timed out), stdout, stderr and the seconds taken.
    """
    path = os.pathsep.join(filter(None, (str(tree / "site"), os.environ.get("PYTHONPATH"))))
    env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", COLUMNS="200",
               HYPOTHESIS_STORAGE_DIRECTORY=str(tree / ".hypothesis"))
    started = time.monotonic()
    child = [sys.executable, str(tree / "tools" / Path(__file__).name), CHILD, *argv]
    process = subprocess.Popen(child, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out: list[bytes] = []
    err: list[bytes] = []
    assert process.stdout is not None and process.stderr is not None
    watch = selectors.DefaultSelector()
    watch.register(process.stdout, selectors.EVENT_READ, out)
    watch.register(process.stderr, selectors.EVENT_READ, err)
    stopped = False
    open_streams = 2
    while open_streams:
        left = timeout - (time.monotonic() - started)
        if left <= 0:
            stopped = True
            break
        for key, _ in watch.select(timeout=min(left, 1.0)):
            chunk = key.fileobj.readline()  # type: ignore[union-attr]
            if not chunk:
                watch.unregister(key.fileobj)
                open_streams -= 1
                continue
            key.data.append(chunk)
            if stop_at and key.data is out and chunk.decode(errors="replace").startswith(stop_at):
                stopped = True
                open_streams = 0
                break
    if stopped:
        process.kill()
    status = process.wait()
    seconds = time.monotonic() - started
    return (None if stopped else status), b"".join(out).decode(errors="replace"), b"".join(err).decode(
        errors="replace"), seconds


FINDINGS = ("FAILED", "CUT OFF")
"""How ``conveyor simulate`` starts the line of a failing run, and of one cut off by its step budget."""

FAILED_RUN = re.compile(
    r"^FAILED (?P<scenario>\S+) seed (?P<seed>\d+) \((?P<strategy>[^,]+), faults (?P<faults>[^)]+)\)"
)


def _judge(
    tree: Path, name: str, file: str, argv: Sequence[str], timeout: float, stop_at: tuple[str, ...] | None
) -> Verdict:
    status, out, err, seconds = _run(tree, [name, file, *argv], timeout, stop_at)
    first_failed = next((line for line in out.splitlines() if line.startswith(FINDINGS)), "")
    if first_failed.startswith("CUT OFF"):
        return Verdict(True, "cut off", seconds, first_failed[:160])
    if status is None and first_failed:
        return Verdict(True, "failed", seconds, first_failed[:160])
    if status is None:
        return Verdict(True, "timeout", seconds, f"ran past {timeout:.0f} s")
    if HOOKED not in err:
        return Verdict(False, "not imported", seconds, "the run never imported the module")
    if status == 0:
        return Verdict(False, "survived", seconds)
    if first_failed:
        return Verdict(True, "failed", seconds, first_failed[:160])
    tail = [line for line in (err + out).splitlines() if line.strip()]
    return Verdict(True, "error", seconds, (tail[-1] if tail else f"exit status {status}")[:160])


def sweep_argv() -> list[str]:
    """The sweep each mutant faces: ``conveyor simulate all`` with its defaults."""
    return ["conveyor", "simulate", "all"]


def tests_argv(directory: str) -> list[str]:
    """A test directory or file, without the slow tests, stopping at the first failure.

    ``--assert=plain``: pytest rewrites the asserts of every module of a distribution that ships a
    pytest plugin (conveyor does), and its import hook, put first, would load the real module ahead
    of the mutant's.
    """
    return ["pytest", "-x", "-q", "-m", "not slow", "-p", "no:cacheprovider", "--assert=plain", directory]


def test_target(path: str, tests: str, root: Path = ROOT) -> str | None:
    """What the tests side runs for a mutant of ``path``: its package's test directory (``package``),
    the module's own test file when there is one (``quick``), or nothing (``none``)."""
    if tests == "none":
        return None
    directory = test_directory(path)
    if tests == "quick":
        own = Path(directory, "test_" + Path(path).stem.lstrip("_") + ".py")
        if (root / own).is_file():
            return str(own)
    return directory


def baseline(tree: Path, paths: Sequence[str], tests: str) -> dict[str, float]:
    """Run the sweep and each test target on the real code; each must pass. Returns seconds per run."""
    times: dict[str, float] = {}
    targets = sorted({target for p in paths if (target := test_target(p, tests, tree)) is not None})
    runs = {"sweep": sweep_argv(), **{target: tests_argv(target) for target in targets}}
    for label, argv in runs.items():
        status, out, _, seconds = _run(tree, ["-", "-", *argv], 3600, None)
        if status != 0:
            tail = "\n".join(out.splitlines()[-8:])
            raise SystemExit(f"{label} fails on the real code; fix that first:\n{tail}")
        times[label] = seconds
    return times


def judge(
    tree: Path, mutant: Mutant, times: dict[str, float], factor: float, tests: str, *, shrink: bool = False,
    sweep: bool = True,
) -> Outcome:
    """Write the mutant to a temporary file and run the sweep (unless ``sweep`` is False), then the tests, against it.

    With ``shrink``, the sweep's first failing run is shrunk too (``conveyor simulate --shrink``).
    """
    outcome = Outcome(mutant)
    source = mutant.source((tree / mutant.path).read_bytes())
    try:
        compile(source, mutant.path, "exec")
    except SyntaxError as error:
        outcome.invalid = f"does not compile: {error.msg}"
        return outcome
    name = module_name(mutant.path)
    with tempfile.TemporaryDirectory(prefix="conveyor-mutant-") as folder:
        file = str(Path(folder) / Path(mutant.path).name)
        Path(file).write_bytes(source)
        if sweep:
            outcome.sweep = _judge(tree, name, file, sweep_argv(), factor * times["sweep"] + 30, FINDINGS)
        found = FAILED_RUN.match(outcome.sweep.detail) if outcome.sweep is not None else None
        if shrink and found is not None:
            outcome.shrunk = _shrunk(tree, name, file, found, factor * times["sweep"] + 120)
        target = test_target(mutant.path, tests, tree)
        if target is not None:
            outcome.tests = _judge(tree, name, file, tests_argv(target), factor * times[target] + 30, None)
    return outcome


SHRUNK = re.compile(r"^Shrunk to (?P<deliveries>\d+) delivery steps \(from (?P<original>\d+)\)")


def _shrunk(tree: Path, name: str, file: str, found: re.Match[str], timeout: float) -> str:
    """Rerun the sweep's first failure of a mutant with ``--shrink``: ``from -> to`` delivery steps, or why not."""
    argv = ["conveyor", "simulate", found["scenario"], "--first-seed", found["seed"], "--seeds", "1",
            "--strategy", found["strategy"], "--faults", found["faults"], "--shrink"]
    status, out, err, _ = _run(tree, [name, file, *argv], timeout, None)
    lines = out.splitlines()
    shrunk = next((match for line in lines if (match := SHRUNK.match(line))), None)
    if shrunk is not None:
        note = next((line.strip() for line in lines if line.startswith("Still longer than")), "")
        return f"{shrunk['original']} -> {shrunk['deliveries']}" + (f" ({note})" if note else "")
    if status is None:
        return f"shrinking ran past {timeout:.0f} s"
    tail = [line for line in (err + out).splitlines() if line.strip()]
    return f"not shrunk: {tail[-1][:100] if tail else status}"


# --- reporting ----------------------------------------------------------------------------------------


def _cell(verdict: Verdict | None) -> str:
    if verdict is None:
        return "-"
    if verdict.how == "survived":
        return "**survived**"
    if verdict.how == "not imported":
        return "not imported"
    return f"killed ({verdict.how})"


def table(outcomes: Sequence[Outcome]) -> list[str]:
    """The Markdown table: mutant, location, verdicts (or equivalent, and why)."""
    shrunk = any(outcome.shrunk is not None for outcome in outcomes)
    lines = ["| mutant | location | sweep | tests |" + (" shrunk (deliveries) |" if shrunk else ""),
             "|---|---|---|---|" + ("---|" if shrunk else "")]
    for outcome in outcomes:
        mutant = outcome.mutant
        where = f"`{mutant.path}:{mutant.line}` {mutant.ident.split(':')[1]}"
        what = f"{mutant.operator}: `{mutant.change}`".replace("|", "\\|")
        if outcome.equivalent is not None or outcome.invalid is not None:
            why = f"equivalent: {outcome.equivalent}" if outcome.equivalent is not None else outcome.invalid
            row = f"| {what} | {where} | {why} | - |"
        elif outcome.unreachable is not None:
            row = f"| {what} | {where} | unreachable: {outcome.unreachable} | {_cell(outcome.tests)} |"
        else:
            row = f"| {what} | {where} | {_cell(outcome.sweep)} | {_cell(outcome.tests)} |"
        lines.append(row + (f" {outcome.shrunk or '-'} |" if shrunk else ""))
    return lines


def summary(outcomes: Sequence[Outcome], seconds: float) -> list[str]:
    """Counts and the score: the sweep's kills over the mutants that are neither equivalent nor unreachable.

    The unreachable ones (code no simulated system runs) are counted apart, and a second score
    counts them as survivors, so that leaving them out hides nothing.
    """
    judged = [o for o in outcomes if o.equivalent is None and o.sweep is not None]
    equivalent = sum(1 for o in outcomes if o.equivalent is not None)
    unreachable = [o for o in outcomes if o.unreachable is not None]
    by_sweep = sum(1 for o in judged if o.sweep is not None and o.sweep.killed)
    tested = [o for o in judged if o.tests is not None]
    by_tests = sum(1 for o in tested if o.tests is not None and o.tests.killed)
    either = sum(1 for o in judged if (o.sweep is not None and o.sweep.killed) or (o.tests is not None
                                                                                    and o.tests.killed))
    lines = [f"{len(outcomes)} mutants: {equivalent} equivalent, {len(unreachable)} unreachable, {len(judged)} judged, "
             f"in {seconds / 60:.1f} min"]
    if judged:
        lines.append(f"killed by the sweep: {by_sweep}/{len(judged)} = {100 * by_sweep / len(judged):.1f}% "
                     "(the score; target >= 90%)")
        if unreachable:
            every = len(judged) + len(unreachable)
            lines.append(f"counting the unreachable as survivors: {by_sweep}/{every} = {100 * by_sweep / every:.1f}%")
            tested_apart = [o for o in unreachable if o.tests is not None]
            if tested_apart:
                killed_apart = sum(1 for o in tested_apart if o.tests is not None and o.tests.killed)
                lines.append(f"unreachable ones killed by the tests: {killed_apart}/{len(tested_apart)}")
        if tested:
            lines.append(f"killed by the tests (own directory): {by_tests}/{len(tested)} = "
                         f"{100 * by_tests / len(tested):.1f}%")
        lines.append(f"killed by either: {either}/{len(judged)} = {100 * either / len(judged):.1f}%")
        survivors = [o.mutant.ident for o in judged if o.sweep is not None and not o.sweep.killed]
        if survivors:
            lines.append("survived the sweep:")
            lines.extend(f"  {ident}" for ident in survivors)
    return lines


def _progress(index: int, total: int, outcome: Outcome) -> str:
    mutant = outcome.mutant
    head = f"[{index}/{total}] {mutant.path}:{mutant.line} {mutant.operator} `{mutant.change}`"
    if outcome.equivalent is not None:
        return f"{head}: equivalent ({outcome.equivalent})"
    if outcome.unreachable is not None and outcome.tests is None:
        return f"{head}: unreachable ({outcome.unreachable})"
    if outcome.invalid is not None:
        return f"{head}: {outcome.invalid}"
    parts = []
    for label, verdict in (("sweep", outcome.sweep), ("tests", outcome.tests)):
        if verdict is not None:
            text = f"{label} {verdict.how} {verdict.seconds:.0f}s"
            if verdict.detail and verdict.how != "survived":
                text += f" ({verdict.detail[:90]})"
            parts.append(text)
    if outcome.shrunk is not None:
        parts.append(f"shrunk {outcome.shrunk}")
    return f"{head}: " + "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Sample the mutants, judge each, print progress, the summary and (with ``--out``) write the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--modules", nargs="*", default=list(MODULES), help="module files, relative to the repo")
    parser.add_argument("--count", type=int, default=COUNT, help="mutants to draw, spread over the modules (0: all)")
    parser.add_argument("--seed", type=int, default=SEED, help="fixes the sample")
    parser.add_argument("--only", nargs="*", default=[], help="run these mutant ids (from --list) only")
    parser.add_argument("--list", action="store_true", help="print the sample's mutant ids and stop")
    parser.add_argument("--tests", choices=TEST_MODES, default="package",
                        help="tests side: the package's test directory, the module's own test file, or none")
    parser.add_argument("--timeout-factor", type=float, default=4.0,
                        help="a child may run this many times the real code's time (plus 30 s)")
    parser.add_argument("--shrink", action="store_true", help="also shrink each mutant's first failing sweep run")
    parser.add_argument("--out", default="", help="write the Markdown table and summary to this file")
    args = parser.parse_args(argv)
    if args.count < 0:
        parser.error(f"--count must be >= 0 (0: every mutant), got {args.count}")
    unknown = [path for path in args.modules if not (ROOT / path).is_file() or Path(path).parts[0] not in FOLDERS]
    if unknown:
        parser.error(f"--modules: no such module {unknown[0]!r}; give files under {', '.join(FOLDERS)}")
    known = equivalents()
    unreached = unreachables()
    with frozen_tree() as tree:
        if args.only:
            everything = {m.ident: m for path in args.modules for m in mutants_of(path, tree)}
            missing = [ident for ident in args.only if ident not in everything]
            if missing:
                raise SystemExit(f"no such mutant: {missing[0]} (see --list --count 0)")
            chosen = [everything[ident] for ident in args.only]
        else:
            chosen = sample(args.modules, args.count, args.seed, tree)
        if args.list:
            for mutant in chosen:
                mark = ("  [equivalent]" if mutant.ident in known
                        else "  [unreachable]" if mutant.ident in unreached else "")
                print(f"{mutant.ident}  (line {mutant.line}){mark}")
            print(f"{len(chosen)} mutants")
            return 0
        started = time.monotonic()
        print(f"{len(chosen)} mutants of {len(args.modules)} modules (seed {args.seed}, tests: {args.tests}); "
              "running the real code first ...", flush=True)
        times = baseline(tree, sorted({m.path for m in chosen}), args.tests)
        print("real code passes: " + ", ".join(f"{k} {v:.0f}s" for k, v in times.items()), flush=True)
        outcomes: list[Outcome] = []
        for index, mutant in enumerate(chosen, 1):
            if mutant.ident in known:
                outcome = Outcome(mutant, equivalent=known[mutant.ident])
            elif mutant.ident in unreached:  # the sweep cannot reach it: only the tests judge it
                outcome = judge(tree, mutant, times, args.timeout_factor, args.tests, sweep=False)
                outcome.unreachable = unreached[mutant.ident]
            else:
                outcome = judge(tree, mutant, times, args.timeout_factor, args.tests, shrink=args.shrink)
            outcomes.append(outcome)
            print(_progress(index, len(chosen), outcome), flush=True)
    lines = summary(outcomes, time.monotonic() - started)
    print("\n".join(lines))
    if args.out:
        out = ROOT / args.out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join([*table(outcomes), "", *lines]) + "\n")
        print(f"table written to {args.out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == CHILD:
        sys.exit(child(sys.argv[2], sys.argv[3], sys.argv[4:]))
    sys.exit(main())
