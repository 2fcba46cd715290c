"""Bug injection by program transformation: candidate mutations of a module's AST, applied as source rewrites.

Kinds (SWE-smith's procedural ones): operator swaps (+/-, </<=, ==/!=, and/or, in/not in), off-by-one
integer constants, a removed `if` branch, a negated condition, a wrong default, swapped call arguments.
Each candidate rewrites only the source segment of its node, and is kept only if re-parsing the result
gives exactly the transformed tree (so formatting never hides a different change).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass

_BIN_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
}
_CMP_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutation:
    kind: str
    file: str
    start: int  # first changed line (0-based) and one past the last, in the original
    end: int
    before: str  # original text of those lines
    after: str  # their replacement

    def rewrite(self) -> dict[str, object]:
        return {"file": self.file, "start": self.start, "end": self.end, "before": self.before, "after": self.after}


# A transform mutates the node (found by its index in ast.walk order) in a fresh tree, returning the
# (node whose source segment changes, its new source) or None when it does not apply.
Transform = Callable[[ast.AST, dict[ast.AST, ast.AST]], "tuple[ast.AST, str] | None"]


def _swap_binop(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAPS:
        node.op = _BIN_SWAPS[type(node.op)]()
        return node, ast.unparse(node)
    return None


def _swap_compare(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP_SWAPS:
        node.ops[0] = _CMP_SWAPS[type(node.ops[0])]()
        return node, ast.unparse(node)
    return None


def _swap_boolop(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    if isinstance(node, ast.BoolOp) and len(node.values) == 2:
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node, ast.unparse(node)
    return None


def _off_by_one(delta: int) -> Transform:
    def transform(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
        is_int = isinstance(node, ast.Constant) and type(node.value) is int
        parent = parents.get(node)
        if not is_int or not isinstance(parent, ast.Compare | ast.BinOp | ast.Slice | ast.Subscript | ast.Call):
            return None
        if isinstance(parent, ast.Call) and not (isinstance(parent.func, ast.Name) and parent.func.id == "range"):
            return None
        assert isinstance(node, ast.Constant)
        node.value = node.value + delta
        return node, repr(node.value)

    return transform


def _negate_condition(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    if isinstance(node, ast.If) and not isinstance(node.test, ast.UnaryOp):
        test = node.test
        node.test = ast.UnaryOp(op=ast.Not(), operand=test)
        return test, f"not ({ast.unparse(test)})"  # the old test still has its source position
    return None


def _wrong_default(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[ast.AST, str] | None:
    parent = parents.get(node)
    if not isinstance(parent, ast.arguments) or not isinstance(node, ast.Constant):
        return None
    if node not in parent.defaults and node not in parent.kw_defaults:
        return None
    if type(node.value) is bool:
        node.value = not node.value
    elif type(node.value) is int:
        node.value += 1
    else:
        return None
    return node, repr(node.value)


TRANSFORMS: dict[str, Transform] = {
    "operator_swap": _swap_binop,
    "comparison_swap": _swap_compare,
    "boolean_swap": _swap_boolop,
    "off_by_one_up": _off_by_one(1),
    "off_by_one_down": _off_by_one(-1),
    "negated_condition": _negate_condition,
    "wrong_default": _wrong_default,
}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset in the joined source of (1-based line, UTF-8 byte column)."""
    before = sum(len(line) for line in lines[: lineno - 1])
    return before + len(lines[lineno - 1].encode()[:col].decode(errors="ignore"))


def _replace(source: str, edits: list[tuple[ast.AST, str]]) -> str:
    lines = source.splitlines(keepends=True)
    spans = []
    for node, text in edits:
        start = _offset(lines, node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = _offset(lines, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        spans.append((start, end, text))
    for start, end, text in sorted(spans, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _removed_branch(node: ast.AST, parents: dict[ast.AST, ast.AST], lines: list[str]) -> str | None:
    """The source without this `if` (no else, alone on its lines, not the only statement of its block)."""
    parent = parents.get(node)
    if not isinstance(node, ast.If) or node.orelse or node.end_lineno is None or parent is None:
        return None
    if lines[node.lineno - 1][: node.col_offset].strip():
        return None  # shares its line with something else
    block = next((b for f in ("body", "orelse") if isinstance(b := getattr(parent, f, None), list) and node in b), [])
    if len(block) < 2:
        return None
    return "".join(lines[: node.lineno - 1] + lines[node.end_lineno :])


def _swapped_arguments(node: ast.AST, source: str) -> str | None:
    if not isinstance(node, ast.Call) or len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
        return None
    first, second = node.args[0], node.args[1]
    text_first, text_second = ast.get_source_segment(source, first), ast.get_source_segment(source, second)
    if not text_first or not text_second or text_first == text_second:
        return None
    return _replace(source, [(first, text_second), (second, text_first)])


KINDS = (*TRANSFORMS, "removed_branch", "swapped_arguments")


@dataclass(frozen=True)
class Candidate:
    """A mutation not yet rendered: its kind and its node's index in ast.walk order. Cheap to enumerate."""

    kind: str
    file: str
    index: int


def _render(
    kind: str, node: ast.AST, tree: ast.AST, parents: dict[ast.AST, ast.AST], source: str
) -> tuple[str, str | None] | None:
    """(new source, the tree dump it must parse to, or None where the rewrite is plain text) or None."""
    if kind == "removed_branch":
        new = _removed_branch(node, parents, source.splitlines(keepends=True))
        return None if new is None else (new, None)
    if kind == "swapped_arguments":
        new = _swapped_arguments(node, source)
        return None if new is None else (new, None)
    edit = TRANSFORMS[kind](node, parents)
    return None if edit is None else (_replace(source, [edit]), ast.dump(tree))


def candidates(source: str, file: str) -> list[Candidate]:
    """Every applicable mutation of one module, in a deterministic order (none rendered yet)."""
    tree = ast.parse(source)
    parents = _parents(tree)
    found = []
    for index, node in enumerate(ast.walk(tree)):
        for kind in KINDS:
            # Try it in place and undo (shallow: transforms replace a field or a list item, never a child).
            saved = {name: copy.copy(getattr(node, name)) for name in node._fields}
            applies = (
                _render(kind, node, tree, parents, source)
                if kind not in TRANSFORMS
                else TRANSFORMS[kind](node, parents)
            )
            for name, value in saved.items():
                setattr(node, name, value)
            if applies is not None:
                found.append(Candidate(kind, file, index))
    return found


def render(source: str, candidate: Candidate) -> Mutation | None:
    """The candidate as a line rewrite, or None when the rewritten source does not parse to exactly the mutant."""
    tree = ast.parse(source)
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == candidate.index)
    rendered = _render(candidate.kind, node, tree, _parents(tree), source)
    if rendered is None:
        return None
    new, expected = rendered
    try:
        dumped = ast.dump(ast.parse(new))
    except SyntaxError:
        return None
    if dumped == ast.dump(ast.parse(source)) or (expected is not None and dumped != expected):
        return None
    return _as_mutation(candidate.kind, candidate.file, source, new)


def _as_mutation(kind: str, file: str, old: str, new: str) -> Mutation | None:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    tail = 0
    while tail < min(len(a), len(b)) - start and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    if start == len(a) == len(b):
        return None
    return Mutation(
        kind, file, start, len(a) - tail, "".join(a[start : len(a) - tail]), "".join(b[start : len(b) - tail])
    )
