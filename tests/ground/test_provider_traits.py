"""What a provider can do is declared once (`overnight.core.provider_traits`), and no code outside
that table and the providers' own packages tests a provider's name: a new provider is its
package, its registry entry and its row (docs/layout.md, "A new provider")."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from activities.providers.registry import PROVIDERS as REGISTRY
from overnight.core.provider_traits import PROVIDERS, Provider, traits

REPO = Path(__file__).resolve().parents[2]
CODE = ("overnight", "activities", "workflows")
PROVIDER_PLACES = ("overnight/core/provider_traits.py", "activities/providers/")


def provider_tests_outside(repo: Path, names: set[str]) -> list[str]:
    """`path:line` of each comparison with, dict keyed by, or call given a provider's name
    outside the providers' places (a default argument naming one is no test of it)."""
    found = []
    for top in CODE:
        for path in sorted((repo / top).rglob("*.py")):
            relative = path.relative_to(repo).as_posix()
            if "__pycache__" in relative or relative.startswith(PROVIDER_PLACES):
                continue
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                if isinstance(node, ast.Compare):
                    named = [node.left, *node.comparators]
                elif isinstance(node, ast.Dict):
                    named = [key for key in node.keys if key is not None]
                elif isinstance(node, ast.Call):
                    named = list(node.args)
                else:
                    continue
                if any(
                    isinstance(inner, ast.Constant) and inner.value in names
                    for part in named
                    for inner in ast.walk(part)
                ):
                    found.append(f"{relative}:{node.lineno}")
    return found


def test_the_spec_the_registry_and_the_traits_know_the_same_providers() -> None:
    assert list(get_args(Provider)) == list(PROVIDERS) == list(REGISTRY)


def test_an_unknown_provider_has_no_trait() -> None:
    unknown = traits("elsewhere")
    assert not (unknown.host_bound or unknown.mounts_worker_folders or unknown.counted_per_key)


def test_no_code_outside_the_providers_places_tests_a_providers_name() -> None:
    assert provider_tests_outside(REPO, set(PROVIDERS)) == []


def test_a_provider_named_outside_its_places_is_caught(tmp_path: Path) -> None:
    (tmp_path / "overnight").mkdir()
    (tmp_path / "overnight" / "rules.py").write_text(
        'def f(spec, provider="runtime"):\n    return spec.provider == "runtime"\n'
    )
    (tmp_path / "activities" / "providers").mkdir(parents=True)
    (tmp_path / "activities" / "providers" / "registry.py").write_text('x = {"runtime": 1}\n')
    assert provider_tests_outside(tmp_path, {"runtime"}) == ["overnight/rules.py:2"]
