"""Every activity call in workflows/ takes its timeouts and retry policy as one bundle of
`workflows.policies` (`**policies.X.options()`), never written out at the call site: a kind of
call's options are found, and changed, in one place, and every call of that kind gets the same."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest

from workflows import policies

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
# The one module that spells the options out: it builds the bundles.
HOME = "policies.py"
OPTIONS = {
    "start_to_close_timeout",
    "schedule_to_close_timeout",
    "heartbeat_timeout",
    "retry_policy",
}
# The SDK's entry points and the routed call of `workflows.calls.routing`.
ENTRY_POINTS = {
    "execute_activity",
    "start_activity",
    "execute_local_activity",
    "start_local_activity",
    "on_host",
}
BUNDLE_METHODS = {"options", "local_options"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


class _Finder(ast.NodeVisitor):
    """Calls that write an option out, and activity calls that pass no bundle."""

    def __init__(self, where: str, entry_points: set[str]) -> None:
        self.where = where
        self.entry_points = entry_points
        self.forwarded: list[str | None] = [None]  # the enclosing function's **kwargs
        self.found: list[str] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.forwarded.append(node.args.kwarg.arg if node.args.kwarg else None)
        self.generic_visit(node)
        self.forwarded.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        written = sorted(str(kw.arg) for kw in node.keywords if kw.arg in OPTIONS)
        if written:
            self.found.append(f"{self.where}:{node.lineno}: writes {', '.join(written)}")
        elif _name(node.func) in self.entry_points and not self._bundled(node):
            self.found.append(f"{self.where}:{node.lineno}: passes no bundle")
        self.generic_visit(node)

    def _bundled(self, call: ast.Call) -> bool:
        for kw in call.keywords:
            value = kw.value
            if kw.arg is not None:
                continue
            if isinstance(value, ast.Call) and _name(value.func) in BUNDLE_METHODS:
                return True
            if isinstance(value, ast.Name) and value.id == self.forwarded[-1]:
                return True  # a wrapper handing its caller's bundle on (`on_host`)
        return False


def _aliases(tree: ast.Module) -> set[str]:
    """Names bound to an entry point (`run = workflow.execute_local_activity if local else ...`)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            _name(part) in ENTRY_POINTS for part in ast.walk(node.value)
        ):
            found |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return found


def unbundled_options(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / HOME:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        finder = _Finder(str(path.relative_to(root.parent)), ENTRY_POINTS | _aliases(tree))
        finder.visit(tree)
        found += finder.found
    return found


def test_every_activity_call_takes_its_options_as_a_bundle() -> None:
    assert unbundled_options(WORKFLOWS) == []
    assert (WORKFLOWS / HOME).is_file()


def test_options_written_at_a_call_site_are_found(tmp_path: Path) -> None:
    root = tmp_path / "workflows"
    (root / "calls").mkdir(parents=True)
    (root / HOME).write_text("KWARGS = ActivityKwargs(start_to_close_timeout=T, retry_policy=R)\n")
    (root / "calls" / "good.py").write_text(
        "async def f(route, arg):\n"
        "    await workflow.execute_activity(N, arg, **policies.REAP.options())\n"
        "    await on_host(route, N, arg, **policies.done_check(5).options(), summary='s')\n"
        "    await workflow.execute_local_activity(N, arg, **policies.SPEC_CHECK.local_options())\n"
        "async def on_host(route, name, arg, **options):\n"
        "    return await workflow.execute_activity(name, arg, **options, **routed(route))\n"
    )
    (root / "calls" / "bad.py").write_text(
        "async def f(route, arg, **options):\n"
        "    await workflow.execute_activity(\n"
        "        N, arg, start_to_close_timeout=T, retry_policy=policies.ACTION_RETRY\n"
        "    )\n"
        "    await on_host(route, N, arg, summary='no bundle')\n"
        "    run = workflow.execute_local_activity if arg else workflow.execute_activity\n"
        "    await run(N, arg, **routed(route))\n"
        "    smuggled = dict(heartbeat_timeout=H)\n"
        "def g(**options):\n"
        "    return workflow.start_activity(N, 1)\n"
    )
    assert unbundled_options(root) == [
        "workflows/calls/bad.py:2: writes retry_policy, start_to_close_timeout",
        "workflows/calls/bad.py:5: passes no bundle",
        "workflows/calls/bad.py:7: passes no bundle",
        "workflows/calls/bad.py:8: writes heartbeat_timeout",
        "workflows/calls/bad.py:10: passes no bundle",
    ]


def test_an_option_left_unset_is_not_passed() -> None:
    assert policies.REAP.options() == {
        "start_to_close_timeout": policies.REAP_TIMEOUT,
        "retry_policy": policies.REAP_RETRY,
    }
    assert policies.DELIVERY.options()["schedule_to_close_timeout"] == policies.DELIVERY_DEADLINE
    assert (
        "schedule_to_close_timeout"
        not in policies.observe(60, poll_seconds=60, at_deadline=True, bounded=False).options()
    )


def test_a_look_bounded_at_the_deadline_ends_its_short_grace_after_its_wait() -> None:
    options = policies.observe(60, poll_seconds=60, at_deadline=True, bounded=True).options()
    bound = timedelta(seconds=60) + policies.DEADLINE_OBSERVE_GRACE
    assert options["start_to_close_timeout"] == options["schedule_to_close_timeout"] == bound
    assert options["heartbeat_timeout"] == policies.observe_heartbeat(60)


def test_a_local_activity_takes_no_heartbeat() -> None:
    assert "heartbeat_timeout" not in policies.SPEC_CHECK.local_options()
    with pytest.raises(ValueError, match="no heartbeat"):
        policies.CREATE.local_options()
