"""Does a task's problem statement quote a hidden test's assertion? Found by parsing the test's source.

A task hides its FAIL_TO_PASS tests; a statement that shows their literal inputs and expected values lets a
policy special-case them (return the expected value for that input) instead of fixing the bug. Here:

1. A test's *assertions* are the `assert` statements and `self.assert*(...)` calls in its function's body:
   the function the node id names, in its class or a base class defined in the same file. A helper
   defined inside the test is part of that body; helpers imported from elsewhere are not followed.
2. A *case* is one row of its `parametrize` decorators (function or class, tables named by a module
   constant included), or the function alone. The case's *literals* are the constants in its assertions
   (strings, numbers, bytes, and containers of them as Python prints them), in what the test's body
   assigned to the names they use (its helpers' parameters: the arguments of its calls), and in the row's
   values. Booleans and None are not literals: they say
   nothing about a particular input. Where an assertion compares a computed value with a plain one (a
   literal, or a name), the plain side's literals are the case's *expected value*.
3. A literal *appears* in a text as a whole token: not inside a longer word or number. A string appears
   bare or quoted; a bare string or number under two characters long is not evidence (any text has them by
   chance), but a quoted one (`'x'`) is.
4. A statement *quotes* an assertion when it contains the assertion's source text and that text holds a
   literal, or two of the case's literals (an input and the expected value, typically), or the case's only
   literal, or its expected value (with the wrong value the code gives, that is enough to special-case),
   a string one quoted (`'that'`, not the word `that`).

The generator masks every literal of its hidden tests out of the failure messages it quotes (`mask`), with
the same matcher the check uses, so what one removes the other would have found.

Long because: one algorithm, the steps above; reading a test's assertions and cases from its source (steps
1-2) serves only the check (step 4), and the mask shares its matcher.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

MASK = "..."
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # the lines the parser counts (not form feeds)
_SHORTEST_BARE = 2  # a bare token shorter than this is everywhere


@dataclass(frozen=True)
class Assertion:
    test: str  # the FAIL_TO_PASS node id it belongs to, case brackets removed
    source: str  # the asserted expression (or the assert call) as written
    source_has_literal: bool
    case: tuple[str, ...]  # the case's literals, as reprs: this assertion's constants and its row's values
    expected: tuple[str, ...] = ()  # those of the side compared with the computed one, when there is one


def test_function(node_id: str) -> str:
    """`tests/t.py::TestA::test_b[x-1]` -> `tests/t.py::TestA::test_b`: the function behind a case."""
    return node_id.split("[", 1)[0]


def hidden_assertions(fail_to_pass: Sequence[str], sources: Mapping[str, str]) -> list[Assertion]:
    """Every assertion of every case of the FAIL_TO_PASS tests whose file is in `sources` (path -> text)."""
    found: list[Assertion] = []
    for test in dict.fromkeys(test_function(n) for n in fail_to_pass):
        path, *names = test.split("::")
        parsed = _parsed(sources[path]) if path in sources and names else None
        if parsed is None:
            continue
        tree, lines = parsed
        scopes = _lookup(tree, names)
        if scopes is None:
            continue
        function = scopes[-1]
        rows = _rows(scopes, _module_constants(tree))
        assigned = _assignments(function)
        for node in _assertion_nodes(function):
            own = _literals(node) + _operand_literals(node, assigned)
            source = _segment(lines, node) or ast.unparse(node)
            side = _expected_side(node)
            for row in rows:
                values = [lit for literals in row.values() for lit in literals]
                expected = [] if side is None else _side_literals(side, assigned, row)
                found.append(Assertion(test, source, bool(own), _unique(own + values), _unique(expected)))
    return found


@functools.lru_cache(maxsize=64)
def _parsed(source: str) -> tuple[ast.Module, tuple[str, ...]] | None:
    """A test file's tree and lines, once per file: every task of a project asks about the same few files.
    Callers only read the tree."""
    try:
        return ast.parse(source), tuple(_LINE.findall(source))
    except SyntaxError:
        return None


def _segment(lines: Sequence[str], node: ast.AST) -> str | None:
    """The source text of `node` from its file's lines (offsets are in UTF-8 bytes, as the parser counts)."""
    start: int | None = getattr(node, "lineno", None)
    end: int | None = getattr(node, "end_lineno", None)
    col: int | None = getattr(node, "col_offset", None)
    end_col: int | None = getattr(node, "end_col_offset", None)
    if start is None or end is None or col is None or end_col is None or end > len(lines):
        return None
    if start == end:
        return lines[start - 1].encode()[col:end_col].decode(errors="replace")
    first = lines[start - 1].encode()[col:].decode(errors="replace")
    last = lines[end - 1].encode()[:end_col].decode(errors="replace")
    return first + "".join(lines[start : end - 1]) + last


def appears(literal: str, text: str) -> bool:
    return _pattern(literal).search(text) is not None


def quotes(statement: str, assertion: Assertion) -> list[str]:
    """What of `assertion` the statement shows (empty: it does not quote it)."""
    flat = " ".join(statement.split())
    if assertion.source_has_literal and " ".join(assertion.source.split()) in flat:
        return [assertion.source]
    shown = [lit for lit in assertion.case if appears(lit, statement)]
    if len(shown) >= 2 or (shown and len(assertion.case) == 1):
        return shown
    # Alone, an expected string must appear quoted: a bare word such as 'that' is in any English sentence.
    return [lit for lit in assertion.expected if lit in shown and _pattern(lit, bare_strings=False).search(statement)]


def quoted_assertions(statement: str, assertions: Sequence[Assertion]) -> list[str]:
    """Evidence, one line per quoted assertion: the test, its source, and what the statement shows of it."""
    lines = []
    for a in assertions:
        shown = quotes(statement, a)
        if shown:
            lines.append(f"{a.test}: `{a.source}` quoted as {', '.join(shown)}")
    return list(dict.fromkeys(lines))


def mask(text: str, literals: Sequence[str]) -> str:
    """`text` with every appearance of the literals replaced by `...` (longest first, so none is left in part)."""
    for literal in sorted(set(literals), key=len, reverse=True):
        text = _pattern(literal).sub(MASK, text)
    return text


@functools.lru_cache(maxsize=4096)
def _pattern(literal: str, *, bare_strings: bool = True) -> re.Pattern[str]:
    """A whole-token match of a literal (given as its repr); a string quoted, or bare too with `bare_strings`."""
    try:
        value: object = ast.literal_eval(literal)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, str | bytes):
        inner = value if isinstance(value, str) else value.decode("ascii", "backslashreplace")
        forms = [f"'{re.escape(inner)}'", f'"{re.escape(inner)}"']
        bare = inner if bare_strings else ""
    else:
        forms, bare = [], literal
    if len(bare) >= _SHORTEST_BARE:
        before = r"(?<![\w.])" if re.match(r"[\w.]", bare) else ""
        after = r"(?![\w]|\.\d)" if re.search(r"[\w.]$", bare) else ""
        forms.append(f"{before}{re.escape(bare)}{after}")
    return re.compile("|".join(forms) or r"(?!)")


def _lookup(tree: ast.Module, names: list[str]) -> list[ast.AST] | None:
    """The classes and the function a node id's names lead to, outermost first (methods found in a base class
    of the same module too: a test class often takes its tests from a mixin)."""
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    scopes: list[ast.AST] = []
    body: list[ast.stmt] = tree.body
    for name in names:
        match = _defined(body, name) or _inherited(scopes[-1] if scopes else None, name, classes)
        if match is None:
            return None
        scopes.append(match)
        body = match.body
    return scopes if isinstance(scopes[-1], ast.FunctionDef | ast.AsyncFunctionDef) else None


def _defined(body: list[ast.stmt], name: str) -> ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (s for s in body if isinstance(s, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name),
        None,
    )


def _inherited(
    scope: ast.AST | None, name: str, classes: dict[str, ast.ClassDef], depth: int = 0
) -> ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None:
    if not isinstance(scope, ast.ClassDef) or depth > 8:
        return None
    for base in scope.bases:
        parent = classes.get(base.id) if isinstance(base, ast.Name) else None
        found = parent and (_defined(parent.body, name) or _inherited(parent, name, classes, depth + 1))
        if found:
            return found
    return None


def _assignments(function: ast.AST) -> dict[str, list[ast.AST]]:
    """What the test's body binds to each local name (assignments, `for` loops, calls of helpers it defines)."""
    bound: dict[str, list[ast.AST]] = {}
    helpers = {
        node.name: [a.arg for a in node.args.posonlyargs + node.args.args]
        for node in ast.walk(function)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node is not function
    }
    for node in ast.walk(function):
        pairs: list[tuple[ast.AST, ast.AST | None]] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            # a helper defined in the test (`def y(fmt, s, e): ... assert ...`): its calls bind its parameters
            params = helpers[node.func.id]
            pairs = [(ast.Name(name), arg) for name, arg in zip(params, node.args, strict=False)]
            pairs += [(ast.Name(k.arg), k.value) for k in node.keywords if k.arg in params]
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            pairs = [(node.target, node.iter)]
        for target, value in pairs:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and value is not None:
                    bound.setdefault(name.id, []).append(value)
    return bound


def _operand_literals(node: ast.AST, assigned: dict[str, list[ast.AST]], hops: int = 3) -> list[str]:
    """The literals the assertion's local names were computed from in the test's body, up to `hops` steps back."""
    found: list[str] = []
    seen: set[str] = set()
    frontier = [node]
    for _ in range(hops):
        names = {n.id for f in frontier for n in ast.walk(f) if isinstance(n, ast.Name)} - seen
        seen |= names
        frontier = [value for name in names for value in assigned.get(name, [])]
        found += [lit for value in frontier for lit in _literals(value)]
    return found


def _assertion_nodes(function: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            yield node.test
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("assert")
        ):
            yield node


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """`NAME = value` at the top of a test module: parametrize tables often live there."""
    return {
        target.id: statement.value
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }


def _table(values: ast.expr | None, constants: dict[str, ast.expr], depth: int = 0) -> list[ast.expr]:
    """The rows of a parametrize table: a list or tuple, a module constant naming one, or a sum of them."""
    if depth > 8 or values is None:
        return []
    if isinstance(values, ast.List | ast.Tuple):
        return list(values.elts)
    if isinstance(values, ast.Name) and values.id in constants:
        return _table(constants[values.id], constants, depth + 1)
    if isinstance(values, ast.BinOp) and isinstance(values.op, ast.Add):
        return _table(values.left, constants, depth + 1) + _table(values.right, constants, depth + 1)
    return []


def _rows(scopes: list[ast.AST], constants: dict[str, ast.expr]) -> list[dict[str, list[str]]]:
    """Each parametrize row's literals by argument name, over the scopes' decorators; one empty row if none."""
    rows: list[dict[str, list[str]]] = []
    for scope in scopes:
        if not isinstance(scope, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in scope.decorator_list:
            if not isinstance(decorator, ast.Call) or _call_name(decorator) != "parametrize":
                continue
            named = {k.arg: k.value for k in decorator.keywords}
            argnames = decorator.args[0] if decorator.args else named.get("argnames")
            values = decorator.args[1] if len(decorator.args) >= 2 else named.get("argvalues")
            names = _argnames(argnames)
            rows += [_row(names, row) for row in _table(values, constants)]
    return rows or [{}]


def _argnames(node: ast.expr | None) -> list[str]:
    """`"a, b"` or `("a", "b")` -> ["a", "b"]."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [name.strip() for name in node.value.split(",") if name.strip()]
    if isinstance(node, ast.List | ast.Tuple):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _row(names: list[str], row: ast.expr) -> dict[str, list[str]]:
    """One row's literals by argument name (under "" when the names cannot be matched to the values)."""
    if isinstance(row, ast.Call) and _call_name(row) == "param":
        values: list[ast.expr] = list(row.args)
    elif len(names) == 1:
        values = [row]
    else:
        values = list(row.elts) if isinstance(row, ast.List | ast.Tuple) else [row]
    if len(values) != len(names):
        return {"": [lit for value in values for lit in _literals(value)]}
    return {name: _literals(value) for name, value in zip(names, values, strict=True)}


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _expected_side(node: ast.AST) -> ast.expr | None:
    """In `computed == expected` (or `assertEqual(computed, expected)`), the expected side, when one is plain: a
    literal or a name, compared with a side that is neither."""
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        sides = [node.left, node.comparators[0]]
    elif isinstance(node, ast.Call) and len(node.args) >= 2:
        sides = list(node.args[:2])
    else:
        return None
    plain = [side for side in sides if isinstance(side, ast.Name) or _text(side) is not None]
    return plain[0] if len(plain) == 1 else None


def _side_literals(side: ast.expr, assigned: dict[str, list[ast.AST]], row: dict[str, list[str]]) -> list[str]:
    """The literals of the expected side: its own, those its name was assigned, or its parametrize value."""
    if isinstance(side, ast.Name) and side.id in row:
        return row[side.id]
    return _literals(side) + _operand_literals(side, assigned)


def _literals(node: ast.AST) -> list[str]:
    """The constants under `node` (and each container of constants) as Python prints them."""
    found: list[str] = []
    for sub in _walk_values(node):
        if isinstance(sub, ast.List | ast.Tuple | ast.Set | ast.Dict | ast.UnaryOp | ast.Constant):
            text = _text(sub)
            if text is not None:
                found.append(text)
    return list(_unique(found))


def _walk_values(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, less the case names of `pytest.param(..., id=...)` and `marks=`: no test uses them as values."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not (isinstance(child, ast.keyword) and child.arg in ("id", "ids", "marks")):
            yield from _walk_values(child)


def _text(node: ast.AST) -> str | None:
    try:
        value: object = ast.literal_eval(node)  # type: ignore[arg-type]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if value is None or isinstance(value, bool) or value in ("", b"", (), [], {}, set()):
        return None
    return repr(value)


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
