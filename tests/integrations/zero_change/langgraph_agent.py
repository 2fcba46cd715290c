"""A LangGraph agent as someone wrote it without alight: no decorator, no alight import.

A two-node graph (draft, then check) on ChatOpenAI, which finds the endpoint in OPENAI_BASE_URL.
"""

import json
import os
from typing import TypedDict

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    word: str
    draft: str
    answer: str


model = ChatOpenAI(model="gpt-4o-mini", max_tokens=24)


def draft(state: State) -> dict[str, str]:
    return {"draft": str(model.invoke(f"Spell {state['word']}.").content)}


def check(state: State) -> dict[str, str]:
    reply = model.invoke(f"Is this the spelling of {state['word']}? {state['draft']}")
    return {"answer": str(reply.content)}


graph = StateGraph(State)
graph.add_node("draft", draft)
graph.add_node("check", check)
graph.add_edge(START, "draft")
graph.add_edge("draft", "check")
graph.add_edge("check", END)
task = json.loads(os.environ.get("ALIGHT_TASK", '{"word": "apple"}'))
print(graph.compile().invoke({"word": task["word"], "draft": "", "answer": ""})["answer"])
