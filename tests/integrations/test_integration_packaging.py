"""Each integration declares its framework range in one constant that matches its pyproject, and is discoverable."""

from __future__ import annotations

import ast
import tomllib
from importlib import import_module
from importlib.metadata import entry_points, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from alight_server.trainer.config.run import load_config

REPO = Path(__file__).resolve().parents[2]
# integration folder -> (import name, the framework distribution whose range it declares)
INTEGRATIONS = {
    "openai_agents": ("alight_openai_agents", "openai-agents"),
    "langchain": ("alight_langchain", "langchain-core"),
    "autogen": ("alight_autogen", "autogen-agentchat"),
    "mcp": ("alight_mcp", "mcp"),
}


@pytest.mark.parametrize("folder", sorted(INTEGRATIONS))
def test_supported_range_is_declared_once_and_matches_the_installed_framework(folder: str) -> None:
    module_name, framework = INTEGRATIONS[folder]
    declared = SpecifierSet(import_module(module_name).SUPPORTED_VERSIONS)
    project = tomllib.loads((REPO / "integrations" / folder / "pyproject.toml").read_text())["project"]
    requirements = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    assert requirements[framework].specifier == declared, f"{folder}: pyproject and SUPPORTED_VERSIONS disagree"
    assert version(framework) in declared, f"installed {framework} {version(framework)} is outside {declared}"


def test_every_integration_is_found_through_the_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="alight.integrations")}
    for folder, (module_name, _) in INTEGRATIONS.items():
        assert found.get(folder) == f"{module_name}:instrument"


@pytest.mark.parametrize("folder", sorted(INTEGRATIONS))
def test_example_config_loads_and_names_a_rollout_function(folder: str) -> None:
    config = load_config(REPO / "examples" / folder / "config.yaml")
    assert Path(config.dataset.train).is_file()
    assert config.agent.entrypoint is not None and config.agent.cwd is not None
    file_name, function = config.agent.entrypoint.split(":")
    tree = ast.parse((Path(config.agent.cwd) / file_name).read_text())
    (entry,) = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function]
    assert any(ast.unparse(d) == "alight.rollout" for d in entry.decorator_list)


def test_instrument_all_turns_every_integration_on_once_and_each_turns_off() -> None:
    import alight

    modules = [import_module(module_name) for module_name, _ in INTEGRATIONS.values()]
    try:
        assert alight.instrument_all() == sorted(INTEGRATIONS) == alight.instrument_all()
        assert all(m.is_instrumented() for m in modules)
    finally:
        for m in modules:
            m.uninstrument()
    assert not any(m.is_instrumented() for m in modules)
