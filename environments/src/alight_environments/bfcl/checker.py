"""BFCL's own data, prompt and checker, run inside .venv-bfcl: one JSON request on stdin, one JSON answer on stdout.

bfcl-eval pins numpy and pulls dozens of API clients, so it lives in its own venv (scripts/setup.sh --bfcl) with
only what its data loading, prompt formatting, decoder and AST checker import. This file imports nothing of alight.

Requests: {"op": "tasks", "categories": [...], "limit": N | null};
{"op": "score", "answers": [{"id": ..., "answer": TEXT}, ...]}, answered with [{"valid": bool, "error": str}, ...].
"""

# pyright: reportMissingImports=false
# (bfcl_eval is installed in .venv-bfcl only, never in the venv pyright reads)

from __future__ import annotations

import copy
import json
import sys
import types
from typing import Any


# The AST checker imports the model registry only to ask whether a model's API renamed "a.b" functions to "a_b"
# (ast_checker.convert_func_name); that registry imports every vendor's client. A prompting model's answer is
# plain text and renames nothing, so the registry is stood in for by one that says so for every model.
class _NoRenames(dict[str, Any]):
    def __missing__(self, model: str) -> Any:
        return types.SimpleNamespace(underscore_to_dot=False)


_registry = types.ModuleType("bfcl_eval.constants.model_config")
_registry.MODEL_CONFIG_MAPPING = _NoRenames()  # type: ignore[attr-defined]
sys.modules["bfcl_eval.constants.model_config"] = _registry

from bfcl_eval.constants.category_mapping import SINGLE_TURN_CATEGORY  # noqa: E402
from bfcl_eval.constants.enums import Language, ReturnFormat  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.model_handler.utils import (  # noqa: E402
    default_decode_ast_prompting,
    system_prompt_pre_processing_chat_model,
)
from bfcl_eval.utils import (  # noqa: E402
    extract_test_category_from_id,
    is_empty_output,
    is_function_calling_format_output,
    is_java,
    is_js,
    is_relevance_or_irrelevance,
    load_dataset_entry,
    load_ground_truth_entry,
)

MAX_ANSWER_CHARS = 20_000  # a model's answer past this is wrong, not parsed: the checker is not a parser of essays


def tasks(categories: list[str], limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` entries of each category, prompted as BFCL prompts a non-function-calling model."""
    out = []
    for category in categories:
        if category not in SINGLE_TURN_CATEGORY:
            raise ValueError(f"not a single-turn BFCL category: {category!r}; these are: {SINGLE_TURN_CATEGORY}")
        for entry in load_dataset_entry(category)[:limit]:
            messages = system_prompt_pre_processing_chat_model(
                copy.deepcopy(entry["question"][0]), entry["function"], entry["id"]
            )
            out.append({"bfcl_id": entry["id"], "category": category, "messages": messages})
    return out


def score(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's verdict on each answer, by its entry id: the relevance checker or the AST checker, as its runner does."""
    entries: dict[str, dict[str, Any]] = {}
    truths: dict[str, Any] = {}
    for category in {extract_test_category_from_id(a["id"]) for a in answers}:
        if category not in SINGLE_TURN_CATEGORY:
            raise ValueError(f"not a single-turn BFCL category: {category!r}")
        entries.update({e["id"]: e for e in load_dataset_entry(category)})
        if not is_relevance_or_irrelevance(category):
            truths.update({t["id"]: t["ground_truth"] for t in load_ground_truth_entry(category)})
    return [_verdict(entries[a["id"]], truths.get(a["id"]), str(a["answer"])) for a in answers]


def _verdict(entry: dict[str, Any], truth: Any, answer: str) -> dict[str, Any]:
    category = extract_test_category_from_id(entry["id"])
    if len(answer) > MAX_ANSWER_CHARS:
        return {"valid": False, "error": f"answer longer than {MAX_ANSWER_CHARS} characters"}
    if is_relevance_or_irrelevance(category):  # eval_runner._evaluate_single_relevance_entry
        try:
            called = not is_empty_output(default_decode_ast_prompting(answer, ReturnFormat.PYTHON))
        except Exception:
            called = False
        valid = not called if "irrelevance" in category else called
        return {"valid": valid, "error": "" if valid else "a call decoded" if called else "no call decoded"}
    language, form = (
        (Language.JAVA, ReturnFormat.JAVA)
        if is_java(category)
        else (Language.JAVASCRIPT, ReturnFormat.JAVASCRIPT)
        if is_js(category)
        else (Language.PYTHON, ReturnFormat.PYTHON)
    )
    try:  # eval_runner._evaluate_single_ast_entry
        decoded = default_decode_ast_prompting(answer, form)
    except Exception as exc:
        return {"valid": False, "error": f"Invalid syntax. Failed to decode AST. {exc}"[:500]}
    if not is_function_calling_format_output(decoded):
        return {"valid": False, "error": "Did not output in the specified format."}
    try:
        result = ast_checker(entry["function"], decoded, truth, language, category, "alight-prompting")
    except Exception as exc:  # a decoded value the checker cannot compare (e.g. a call as an argument)
        return {"valid": False, "error": f"checker refused the answer: {exc}"[:500]}
    return {"valid": bool(result["valid"]), "error": "; ".join(map(str, result.get("error", [])))[:500]}


def main() -> None:
    request = json.load(sys.stdin)
    if request["op"] == "tasks":
        answer: Any = tasks(request["categories"], request.get("limit"))
    else:
        answer = score(request["answers"])
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
