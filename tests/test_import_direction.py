"""Which way the arrows run (docs/architecture.md): a lower room never imports a higher one, and no circle of imports.

An arrow is any import of one of the project's modules, wherever it stands: at module level, inside a
function, under `if TYPE_CHECKING:`, or `importlib.import_module("a.literal")`. A function-level import
that dodges a cycle is a cycle. `from pkg import name` is an arrow to `pkg.name` when that is a module,
else to `pkg` itself; the parent packages Python runs on the way are not arrows.

ROOMS names, per scope, its rooms floor by floor from the ground up. A module belongs to the room whose
name is the longest prefix of its own; an arrow between two rooms of one scope must run down: to a room
on a lower floor (rooms on one floor are independent of each other). A scope's own `__init__` stands
above all of its rooms. A module in a scope that no room holds fails the test: a new file takes a room.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = {
    "alight": REPO / "alight",
    "alight_server": REPO / "server/src/alight_server",
    "alight_openai_agents": REPO / "integrations/openai_agents/src/alight_openai_agents",
    "alight_langchain": REPO / "integrations/langchain/src/alight_langchain",
    "alight_autogen": REPO / "integrations/autogen/src/alight_autogen",
    "alight_mcp": REPO / "integrations/mcp/src/alight_mcp",
    "alight_sandbox": REPO / "sandbox/src/alight_sandbox",
    "alight_testing": REPO / "testing/src/alight_testing",
    "alight_environments": REPO / "environments/src/alight_environments",
}

Floors = Sequence[Sequence[str]]
ROOMS: dict[str, Floors] = {
    "": [
        ["alight"],  # the SDK: never imports the server or an integration
        ["alight_openai_agents", "alight_langchain", "alight_autogen", "alight_mcp", "alight_server"],
        # the coding kit (its `alight data clean --probe` runs the server's evaluation) and the test doubles
        ["alight_sandbox", "alight_testing"],
        ["alight_environments"],  # environments nobody here wrote; the core finds them by entry point only
    ],
    "alight_server": [
        # the faces of folders whose rooms stand on several floors (they import nothing)
        ["http", "stacks", "evaluation", "trajectories"],
        # policies: which policy serves a call, and a policy's own version among the global ones
        ["http.json_depth", "http.hooks", "http.error_types", "trajectories.call_output", "policies"],
        ["store.keys.upstream", "http.auth", "redaction", "evaluation.sources"],  # sources: found by entry point
        ["store", "controller"],  # the controller reaches the server over HTTP, with the SDK's client
        ["config"],  # it turns `data_key:` into the store's key-encryption key source (store/keys/kek.py)
        ["http.errors", "http.deps", "trajectories.join", "store.purge"],
        ["gateway", "traces.otlp", "evaluation.evaluators", "api"],
        ["stacks.server_thread"],
        ["inference"],
        ["trainer"],
        ["traces"],  # imported traces: read, rendered with the policy's template, checked by the sample builder
        ["ui"],
        ["app"],
        ["stacks.state"],
        ["stacks.kinds", "stacks.run_store"],  # run_store: how every reader opens a run's store
        ["stacks.opening"],  # the stacks a training run (or an evaluation) is handed
        ["evaluation.policy", "evaluation.traces"],
        ["evaluation.benchmark"],  # `alight eval --benchmark`: a package's benchmark on evaluation.policy's run
        ["commands", "stacks.one_rollout"],
    ],
    "alight_server.gateway": [
        ["reply"],
        ["errors", "metrics"],
        ["flavours"],
        ["capture", "upstream", "pause", "callers"],
        ["store_sync", "limits"],
        ["container"],
        ["request"],
        ["admin"],
        ["routes"],
    ],
}


def modules(sources: Mapping[str, Path]) -> dict[str, Path]:
    """Every module of the given packages by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package, root in sources.items():
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _named(module: str, name: str, known: Mapping[str, Path]) -> str | None:
    """The known module an import of `name` from `module` reaches: the submodule, else the module itself."""
    if f"{module}.{name}" in known:
        return f"{module}.{name}"
    while module and module not in known:
        module = module.rpartition(".")[0]
    return module or None


def _imported(node: ast.AST, module: str, is_package: bool, known: Mapping[str, Path]) -> Iterable[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _named(alias.name, "", known)
            if target:
                yield target
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[: len(here) - node.level + 1]
            base = ".".join([*here, base] if base else here)
        for alias in node.names:
            target = _named(base, alias.name, known)
            if target:
                yield target
    elif (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        target = _named(node.args[0].value, "", known)
        if target:
            yield target


def arrows(sources: Mapping[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first such import}, for the project's own modules."""
    known = modules(sources)
    graph: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        out = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, module, path.name == "__init__.py", known):
                if target != module:
                    out.setdefault(target, getattr(node, "lineno", 0))
    return graph


def _inside(module: str, scope: str) -> bool:
    return not scope or module == scope or module.startswith(scope + ".")


def _room(module: str, scope: str, floors: Floors) -> tuple[str, int] | None:
    """(room, floor) of `module` in `scope`: the room named by the longest prefix; the scope's face on top."""
    if module == scope:
        return scope, len(floors)
    rest = module[len(scope) + 1 :] if scope else module
    best: tuple[str, int] | None = None
    for level, rooms in enumerate(floors):
        for room in rooms:
            if (rest == room or rest.startswith(room + ".")) and (best is None or len(room) > len(best[0])):
                best = (room, level)
    return best


def misplaced(graph: Mapping[str, Mapping[str, int]], rooms: Mapping[str, Floors]) -> list[str]:
    """Modules that no room of their scope holds, and arrows that run up or across a floor."""
    found = [
        f"{module} is in no room of {scope or 'the top'}: give it one in ROOMS (tests/test_import_direction.py)"
        for scope, floors in rooms.items()
        for module in graph
        if _inside(module, scope) and _room(module, scope, floors) is None
    ]
    for source, targets in graph.items():
        for target, line in targets.items():
            for scope, floors in rooms.items():
                if not (_inside(source, scope) and _inside(target, scope)):
                    continue
                here, there = _room(source, scope, floors), _room(target, scope, floors)
                if here is None or there is None or here[0] == there[0]:
                    continue
                if there[1] >= here[1]:
                    where = "the same floor as" if there[1] == here[1] else "a floor above"
                    found.append(f"{source}:{line} imports {target}: {there[0]} stands on {where} {here[0]}")
    return sorted(found)


def circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """Every set of two or more modules that import each other in a loop (Tarjan's strongly connected parts)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph.get(target, {})))))
                    break
                if target in stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
    return found


def test_every_arrow_of_the_project_runs_down_to_a_lower_room() -> None:
    assert misplaced(arrows(SOURCES), ROOMS) == []


def test_no_modules_of_the_project_import_each_other_in_a_circle() -> None:
    assert circles(arrows(SOURCES)) == []


def _tree(root: Path, files: Mapping[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"pkg": root / "pkg"}


TOY_ROOMS: dict[str, Floors] = {"": [["pkg"]], "pkg": [["low"], ["mid_a", "mid_b"], ["high"]]}


def test_a_lower_room_importing_a_higher_one_is_found_wherever_the_import_stands(tmp_path: Path) -> None:
    sources = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def later():\n    from pkg.high import thing\n",
            "mid_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import mid_b\n",
            "mid_b.py": "import importlib\nimportlib.import_module('pkg.high')\n",
            "high.py": "from pkg import low, mid_a\nthing = 1\n",
        },
    )
    found = misplaced(arrows(sources), TOY_ROOMS)
    assert found == [
        "pkg.low:2 imports pkg.high: high stands on a floor above low",
        "pkg.mid_a:3 imports pkg.mid_b: mid_b stands on the same floor as mid_a",
        "pkg.mid_b:2 imports pkg.high: high stands on a floor above mid_b",
    ]


def test_a_module_no_room_holds_is_named(tmp_path: Path) -> None:
    sources = _tree(tmp_path, {"__init__.py": "", "low.py": "", "stray.py": "from pkg import low\n"})
    assert misplaced(arrows(sources), TOY_ROOMS) == [
        "pkg.stray is in no room of pkg: give it one in ROOMS (tests/test_import_direction.py)"
    ]


def test_a_circle_closed_by_a_function_level_import_is_a_circle(tmp_path: Path) -> None:
    sources = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "from pkg.sub.a import x\n",
            "sub/__init__.py": "",
            "sub/a.py": "x = 1\ndef f():\n    from ..low import y\n",
            "sub/b.py": "from pkg.sub import a\n",
        },
    )
    assert circles(arrows(sources)) == [["pkg.low", "pkg.sub.a"]]
