"""Search agent: the plain OpenAI client answers two-hop questions with a BM25 search tool over a local corpus.

Search-R1's loop, made small: the model searches in text (`SEARCH: <query>`), reads the best passages, searches
again for the entity it found, and answers (`ANSWER: <answer>`). The corpus (corpus.jsonl, from make_tasks.py)
is facts about invented people, companies and towns, so the answer has to come from the tool. Outside alight,
`python agent.py "In which town was the person who founded Kuku Mills born?"` runs it against any OpenAI-compatible
server in OPENAI_BASE_URL. Under `alight train`, the reward is 1.0 for `ANSWER: <the answer>` exactly
(case and punctuation aside), else 0.
"""

from __future__ import annotations

import functools
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

import bm25s
from bm25s.tokenization import Tokenized
from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

tracer = trace.get_tracer("search-qa-agent")

MODEL = "policy"  # the gateway maps any name onto the policy being trained
CORPUS = Path(__file__).with_name("corpus.jsonl")
MAX_TURNS = 4  # two searches and the answer, and one spare
MAX_TOKENS = 24
TOP_K = 2  # passages a search returns
MAX_QUERY_CHARS = 200  # the query is model-written: never trusted to be short
SYSTEM = (
    "You answer questions about people, companies and towns using a search tool over an encyclopedia. "
    "To search, reply with exactly one line:\n"
    "SEARCH: <query>\n"
    "You get the best matching facts. Questions need two searches: first about the name in the question, "
    "then about the name you found. When you know the answer, reply with exactly one line:\n"
    "ANSWER: <answer>"
)
# Two worked examples (their names are in no corpus): small models follow a shown format far better than a described
# one, and with one example this one answered after the first search most of the time.
EXAMPLE = [
    {"role": "user", "content": "In which town was the person who founded Dolma Labs born?"},
    {"role": "assistant", "content": "SEARCH: who founded Dolma Labs"},
    {"role": "user", "content": "Dolma Labs was founded by Tiro Vassel.\nDolma Labs is based in Kanby."},
    {"role": "assistant", "content": "SEARCH: Tiro Vassel born"},
    {"role": "user", "content": "Tiro Vassel was born in Hesk.\nTiro Vassel works for Dolma Labs."},
    {"role": "assistant", "content": "ANSWER: Hesk"},
    {"role": "user", "content": "Who founded the company that Mero Talk works for?"},
    {"role": "assistant", "content": "SEARCH: Mero Talk works for"},
    {"role": "user", "content": "Mero Talk works for Pelo Mills.\nMero Talk was born in Fisk."},
    {"role": "assistant", "content": "SEARCH: who founded Pelo Mills"},
    {"role": "user", "content": "Pelo Mills was founded by Sana Ruvo.\nPelo Mills is based in Dorn."},
    {"role": "assistant", "content": "ANSWER: Sana Ruvo"},
]
SEARCH = re.compile(r"^\s*SEARCH:\s*(.+?)\s*$", re.MULTILINE)
ANSWER = re.compile(r"^\s*ANSWER:\s*(.+?)\s*$")


class Search:
    """BM25 (bm25s) over one-sentence passages."""

    def __init__(self, passages: list[str]) -> None:
        self.passages = passages
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False)

    def __call__(self, query: str, k: int = TOP_K) -> list[str]:
        tokens = bm25s.tokenize([query[:MAX_QUERY_CHARS]], stopwords="en", show_progress=False)
        if not isinstance(tokens, Tokenized) or not tokens.vocab:  # nothing searchable (stopwords, punctuation)
            return []
        found, scores = self.index.retrieve(tokens, k=min(k, len(self.passages)), show_progress=False)
        return [self.passages[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]


@functools.cache
def corpus_search() -> Search:
    return Search([json.loads(line)["text"] for line in CORPUS.read_text().splitlines()])


def search_tool(query: str, search: Search) -> str:
    """The tool, as a span: the passages found, one a line."""
    with tracer.start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} search",
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: "search",
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: query,
        },
    ) as span:
        result = "\n".join(search(query)) or "no results"
        span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, result)
        return result


def solve(question: str, client: OpenAI, search: Search) -> str:
    """The tool loop: search, read, search again, answer. Returns the final reply."""
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": question}]
    reply = ""
    for _ in range(MAX_TURNS):
        response = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=MAX_TOKENS)
        reply = response.choices[0].message.content or ""
        call = SEARCH.search(reply)
        if call is None:
            return reply
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": search_tool(call.group(1), search)})
    return reply


def normalize(text: str) -> str:
    return " ".join(text.lower().translate(str.maketrans("", "", string.punctuation)).split())


def score(reply: str, answer: str) -> float:
    """1.0 for a reply of exactly `ANSWER: <answer>` (case, punctuation and spacing aside), else 0."""
    match = ANSWER.match(reply)
    return 1.0 if match and normalize(match.group(1)) == normalize(answer) else 0.0


@alight.rollout
def main(task: dict[str, Any]) -> float:
    reply = solve(task["question"], OpenAI(max_retries=8), corpus_search())
    return score(reply, task["answer"])


if __name__ == "__main__":
    print(solve(" ".join(sys.argv[1:]), OpenAI(), corpus_search()))
