"""Test agent: a LangGraph graph with two LLM nodes, planner then solver, each its own conversation."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

import alight
import alight_langchain

alight_langchain.instrument()


@alight.rollout
def main(task: dict[str, Any]) -> float:
    llm = ChatOpenAI(model="policy")

    def planner(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([HumanMessage(f"plan: {task['question']}")])]}

    def solver(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([HumanMessage(f"solve: {task['question']}")])]}

    graph = StateGraph(MessagesState)
    graph.add_node("planner", planner)
    graph.add_node("solver", solver)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "solver")
    graph.add_edge("solver", END)
    graph.compile(name="plan_and_solve").invoke({"messages": [("user", task["question"])]})
    return 1.0
