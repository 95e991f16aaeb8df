"""The suite's own rules, read off tests/ with ``ast`` (nothing is imported):

- every test function checks something that can fail: an ``assert``, a
  ``pytest.raises``/``pytest.warns``/``pytest.fail``, an ``assert_*`` method (pytester's
  ``assert_outcomes``), or a call of an asserting helper
  (a module-level function of tests/support or tests/chaos, or a function of the test's
  own module, that asserts, raises ``AssertionError`` or calls such a helper itself);
- no assertion bounds a measured duration from above (nor a measured rate from below):
  a loaded CI machine breaks those, and a deadline (``asyncio.wait_for``, ``within=``)
  already decides "in time". A duration is a difference of ``time.monotonic()``,
  ``time.perf_counter()``, ``time.time()`` or ``loop.time()`` readings (directly, through
  names they were assigned to, or lists they were appended to). Lower bounds ("a delay
  must pass") are fine, each listed below with its reason; an entry that no longer
  matches fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
HELPER_DIRS = ("tests/support/", "tests/chaos/")

CLOCKS = frozenset({"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns"})
RAISES = frozenset({"raises", "warns", "fail", "deprecated_call"})

# "file::test" -> why its lower bound on a measured duration is the point of the test.
LOWER_BOUNDS = {
    "tests/integration/test_group_claim_path.py::test_a_grouped_drain_does_not_repeat_an_empty_claim_of_jobs_without_a_group": (
        "a busy grouped worker's empty claim of jobs without a group runs at most once per "
        "PLAIN_RECHECK (0.05 s): n of them take at least (n - 10) x 0.05 s"
    ),
    "tests/integration/test_group_claim_path.py::test_idle_grouped_kinds_are_not_claimed_at_every_turn": (
        "an idle grouped kind's claim runs at most once per GROUPED_RECHECK (0.25 s) while "
        "another keeps the worker busy: n of them take at least (n - 2) x 0.25 s"
    ),
    "tests/integration/test_worker.py::test_delayed_job_invisible_until_due": (
        "a job enqueued with after=0.6 must not start before 0.6 s"
    ),
    "tests/integration/test_worker_recovery.py::test_forced_shutdown_releases": (
        "the handler is cancelled only once shutdown_timeout (0.3 s) has run out"
    ),
    "tests/integration/test_worker_options.py::test_rate_limit_paces_claims": (
        "a rate limit of 20/s (burst 2) cannot start 30 jobs in under 1.4 s"
    ),
    "tests/integration/test_worker_options.py::test_shared_rate_limit_holds_across_workers": (
        "a shared 10/s limit holds across three workers: 12 starts take at least 1.1 s"
    ),
    "tests/integration/test_worker_options.py::test_register_overrides_rate": (
        "the rate given to register() (10/s) paces the starts the task's own rate would not"
    ),
    "tests/integration/test_pool.py::test_a_loop_that_dies_is_restarted_after_a_second": (
        "a crashed loop is restarted after a second, not at once"
    ),
    "tests/integration/test_wait.py::test_wait_returns_a_finished_job_at_once_and_times_out_on_a_pending_one": (
        "wait(timeout=0.2) must not give up before 0.2 s"
    ),
    "tests/integration/test_alerts.py::test_a_failed_delivery_is_retried_after_retry_after": (
        "a failed webhook delivery is retried only after its retry_after (0.5 s)"
    ),
    "tests/chaos/test_proxy.py::test_delay_adds_latency": (
        "the proxy's delay must add at least the latency it was set to"
    ),
}


Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Module:
    path: str  # relative to the repository root
    tree: ast.Module
    functions: dict[str, list[Function]] = field(default_factory=dict)


@functools.cache  # both rules read the same files: parsed once (nothing changes them)
def _modules() -> list[Module]:
    out = []
    for p in sorted(TESTS.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        m = Module(rel, ast.parse(p.read_text(), rel))
        for node in ast.walk(m.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                m.functions.setdefault(node.name, []).append(node)
        out.append(m)
    return out


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


# Both are asked of the same shared helpers once per test module: worked out once each.
@functools.cache
def _checks_directly(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "AssertionError":
                return True
        if isinstance(node, ast.Call) and (_called_name(node) or "").startswith("assert_"):
            return True  # pytester's assert_outcomes, a mock's assert_called_with, ...
        if isinstance(node, ast.Call) and _called_name(node) in RAISES:
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if f.value.id == "pytest":
                    return True
            elif isinstance(f, ast.Name):
                return True  # from pytest import raises
    return False


@functools.cache
def _calls(fn: ast.AST) -> frozenset[str]:
    return frozenset(n for c in ast.walk(fn) if isinstance(c, ast.Call) and (n := _called_name(c)))


def asserting_helpers(modules: list[Module], own: Module | None = None) -> set[str]:
    """Names of the functions that check: the shared helpers' module-level functions, and
    ``own``'s functions at any depth; closed over calls among them."""
    candidates: dict[str, list[ast.AST]] = {}
    for m in modules:
        if m.path.startswith(HELPER_DIRS) and not Path(m.path).name.startswith("test_"):
            for node in m.tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    candidates.setdefault(node.name, []).append(node)
    if own is not None:
        for name, fns in own.functions.items():
            candidates.setdefault(name, []).extend(fns)
    found = {n for n, fns in candidates.items() if any(_checks_directly(f) for f in fns)}
    while True:
        more = {
            n
            for n, fns in candidates.items()
            if n not in found and any(_calls(f) & found for f in fns)
        }
        if not more:
            return found
        found |= more


def _test_functions(m: Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    if not Path(m.path).name.startswith("test_"):
        return
    for node in m.tree.body:
        body = node.body if isinstance(node, ast.ClassDef) else [node]
        for fn in body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name.startswith(
                "test_"
            ):
                yield fn


def unchecked_tests(modules: list[Module]) -> list[str]:
    out = []
    for m in modules:
        helpers = asserting_helpers(modules, m)
        for fn in _test_functions(m):
            if not (_checks_directly(fn) or _calls(fn) & helpers):
                out.append(f"{m.path}::{fn.name}")
    return out


# --- measured durations -------------------------------------------------------------------


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    f = node.func
    if f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time":
        return True
    return f.attr == "time" and "loop" in ast.unparse(f.value)  # loop.time()


class Durations:
    """Which names of one function hold clock readings (or lists of them), and which hold
    durations computed from them (with their sign: +1, or -1 for a rate)."""

    def __init__(self, fn: ast.AST) -> None:
        self.clocks: set[str] = set()
        self.durations: dict[str, int] = {}
        nodes = list(ast.walk(fn))
        if not any(_is_clock_call(n) for n in nodes):
            return  # no clock read: no name can hold a reading or a duration
        for _ in range(3):  # assignments may refer to names assigned later in the walk
            for node in nodes:
                self._learn(node)

    def _learn(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if (sign := self.sign(node.value)) != 0:
                self.durations.update(dict.fromkeys(names, sign))
            elif self.reads_clock(node.value):
                self.clocks.update(names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            # started.append(time.monotonic()), stamps[...] handled as a subscript below
            if node.func.attr == "append" and isinstance(node.func.value, ast.Name):
                if node.args and self.reads_clock(node.args[0]):
                    self.clocks.add(node.func.value.id)
        if isinstance(node, ast.Assign) and self.reads_clock(node.value):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    self.clocks.add(t.value.id)  # stamps[job] = time.monotonic()

    def reads_clock(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            if _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in self.clocks):
                return True
        return False

    def sign(self, node: ast.AST) -> int:
        """+1 for an expression that grows with a measured duration, -1 for one that
        shrinks with it (a rate), 0 for anything else."""
        if isinstance(node, ast.Name):
            return self.durations.get(node.id, 0)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Sub) and (
                self.reads_clock(node.left) or self.reads_clock(node.right)
            ):
                return 1
            left, right = self.sign(node.left), self.sign(node.right)
            if isinstance(node.op, ast.Div):
                return left or -right
            if isinstance(node.op, ast.Mult | ast.Add | ast.Sub):
                return left or right
        if isinstance(node, ast.Call) and node.args and _called_name(node) in ("abs", "float"):
            return self.sign(node.args[0])
        return 0


def duration_bounds(fn: ast.AST) -> Iterator[tuple[str, int, str]]:
    """("upper" | "lower", line, text) for each assertion comparing a measured duration."""
    d = Durations(fn)
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in ast.walk(node.test):
            if not isinstance(cmp, ast.Compare):
                continue
            operands = [cmp.left, *cmp.comparators]
            for op, left, right in zip(cmp.ops, operands[:-1], operands[1:], strict=True):
                smaller = isinstance(op, ast.Lt | ast.LtE)
                if not (smaller or isinstance(op, ast.Gt | ast.GtE)):
                    continue
                for side, sign in ((left, 1), (right, -1)):
                    s = d.sign(side)
                    if s:
                        upper = (s * sign > 0) == smaller
                        kind = "upper" if upper else "lower"
                        yield kind, cmp.lineno, ast.unparse(cmp)


def timing_problems(modules: list[Module]) -> tuple[list[str], set[str]]:
    """Upper bounds anywhere, lower bounds not allowed; and the allowed ones seen."""
    problems, seen = [], set()
    for m in modules:
        for fns in m.functions.values():
            for fn in fns:
                where = f"{m.path}::{fn.name}"
                for kind, line, text in duration_bounds(fn):
                    if kind == "lower" and where in LOWER_BOUNDS:
                        seen.add(where)
                    else:
                        problems.append(f"{m.path}:{line}: {kind} bound: {text}")
    return sorted(set(problems)), seen


# --- the tests ----------------------------------------------------------------------------


def test_every_test_checks_something() -> None:
    assert unchecked_tests(_modules()) == []


def test_no_upper_bound_on_a_measured_duration() -> None:
    problems, seen = timing_problems(_modules())
    assert problems == []
    assert sorted(set(LOWER_BOUNDS) - seen) == []  # allowed, but no longer there


def _module(source: str, path: str = "tests/integration/test_example.py") -> Module:
    m = Module(path, ast.parse(source))
    for node in ast.walk(m.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            m.functions.setdefault(node.name, []).append(node)
    return m


def test_the_rules_catch_what_they_are_for() -> None:
    """The two checks above must be able to fail: each on a small module that breaks it."""
    m = _module(
        "async def _wait_ok(x):\n    assert x\n"
        "def _quiet(x):\n    return x\n"
        "async def test_quiet():\n    _quiet(1)\n"
        "async def test_helped():\n    await _wait_ok(1)\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
    )
    assert unchecked_tests([m]) == [f"{m.path}::test_quiet"]
    timed = _module(
        "async def test_timed():\n"
        "    t0 = time.monotonic()\n"
        "    started = []\n"
        "    started.append(time.monotonic())\n"
        "    assert time.monotonic() - t0 < 2.0\n"
        "    assert 0.5 <= started[0] - t0\n"
        "    took = time.perf_counter() - t0\n"
        "    assert 5 > took\n"
        "    rate = 10 / (started[-1] - started[0])\n"
        "    assert rate >= 7\n"
        "    assert rate <= 11\n"
    )
    bounds = [(kind, line) for kind, line, _ in duration_bounds(timed.functions["test_timed"][0])]
    assert sorted(bounds) == [
        ("lower", 6),
        ("lower", 11),
        ("upper", 5),
        ("upper", 8),
        ("upper", 10),
    ]
