"""The server side of an MCP environment: a game per attempt at its gateway's /mcp, its score posted at the end.

`serve_environment(Env)` is what an `alight.environments` entry point names; the server calls it with its app
and the config's `environment:` section. It adds

1. `POST /gw/{rollout}/{attempt}/v1/mcp` (MCP over streamable HTTP, stateless JSON): the attempt's token opens
   that attempt's own game on its first call, only while the attempt runs; every tool call is an event
   (`environment_call`) on the rollout;
2. an attempt-finished hook: the game's score becomes the attempt's final reward (source `evaluator`, which
   outranks anything the agent posts), an `environment` event records it with the game's process, and the
   game is closed, whatever the outcome, so no process outlives its attempt. An attempt that never opened its
   game is scored on a fresh one, opened at the end: never connecting scores as connecting and doing nothing (a
   game's start is a function of its task, and need not be 0: ScienceWorld's easy find tasks start at 8);
3. on shutdown, every game still open is closed.

The game runs in the server's process tree, outside the agent's sandbox: the agent holds only its token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Response
from fastapi.responses import JSONResponse

from alight.schemas import AttemptFinish, AttemptStatus, EventCreate, RewardCreate, RewardSource, Rollout
from alight_environments.mcp.game import Environment, Game, game_tools
from alight_environments.mcp.protocol import Tool, answer
from alight_server.evaluation.evaluators import agent_outcome
from alight_server.http.deps import AttemptDep, StoreDep
from alight_server.store.base import Store

MAX_RESULT_CHARS = 4000  # per recorded tool call; the game's full answer still goes to the agent


class Episodes:
    """The open games by (rollout id, attempt); opening and closing one attempt's game happen once."""

    def __init__(self, environment: Environment, options: dict[str, Any]) -> None:
        self.environment, self.options = environment, options
        self._games: dict[tuple[str, int], tuple[Game, dict[str, Tool]]] = {}
        self._ended: set[tuple[str, int]] = set()  # a call racing its attempt's end must not open a second game
        self._lock = threading.Lock()  # one game per attempt even when its first calls arrive together

    def tools(self, rollout_id: str, attempt: int, task: Any) -> dict[str, Tool]:
        """The attempt's game's tools, its game opened on the first call; 409 once the attempt has ended."""
        with self._lock:
            key = (rollout_id, attempt)
            if key in self._ended:
                raise HTTPException(409, f"attempt {attempt} of {rollout_id!r} has ended: its game is closed")
            if key not in self._games:
                game = self.environment.open(task, self.options)
                self._games[key] = (game, locked(game_tools(game), threading.Lock()))
            return self._games[key][1]

    def pop(self, rollout_id: str, attempt: int) -> Game | None:
        with self._lock:
            self._ended.add((rollout_id, attempt))
            opened = self._games.pop((rollout_id, attempt), None)
        return opened[0] if opened else None

    def close_all(self) -> None:
        with self._lock:
            games, self._games = [g for g, _ in self._games.values()], {}
        for game in games:
            game.close()


def locked(tools: dict[str, Tool], lock: threading.Lock) -> dict[str, Tool]:
    """The same tools, one call at a time (a game is a single-threaded simulator)."""

    def serial(run: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
        def call(arguments: dict[str, Any]) -> str:
            with lock:
                return run(arguments)

        return call

    return {name: Tool(t.name, t.description, serial(t.run), t.properties) for name, t in tools.items()}


def serve_environment(environment_class: Callable[[], Environment]) -> Callable[[FastAPI, dict[str, Any]], None]:
    """The `alight.environments` entry point for an environment class."""

    def install(app: FastAPI, options: dict[str, Any]) -> None:
        environment = environment_class()
        episodes = Episodes(environment, options)

        @app.post("/gw/{rollout_id}/{attempt}/v1/mcp", tags=["environment"], name="environment_mcp")
        def mcp(claims: AttemptDep, store: StoreDep, message: Any = Body(None)) -> Response:
            rollout = store.get_rollout(claims.rollout_id)
            row = next((a for a in rollout.attempts if a.attempt == claims.attempt), None)
            if row is None or row.status is not AttemptStatus.RUNNING:
                raise HTTPException(409, f"attempt {claims.attempt} of {claims.rollout_id!r} is not running: no game")
            reply = answer(
                message, lambda: episodes.tools(rollout.id, claims.attempt, rollout.task), f"alight-{environment.name}"
            )
            if reply is None:
                return Response(status_code=202)
            if isinstance(message, dict) and message.get("method") == "tools/call":
                record_call(store, claims.rollout_id, claims.attempt, message.get("params"), reply["result"])
            return JSONResponse(reply)

        @app.api_route("/gw/{rollout_id}/{attempt}/v1/mcp", methods=["GET", "DELETE"], include_in_schema=False)
        def no_stream() -> Response:
            return Response(status_code=405, headers={"Allow": "POST"})  # stateless: no server stream, no session

        def finished(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
            game = episodes.pop(rollout.id, attempt)
            opened, scored = game is not None, agent_outcome(finish)  # a timeout or infra failure is not scored
            if game is None and scored:
                game = environment.open(rollout.task, episodes.options)  # its start, as the agent would have found it
            try:
                score = game.score() if game is not None else None
                if scored and score is not None:
                    reward = RewardCreate(id=f"environment-{attempt}", attempt=attempt, value=score, final=True,
                                          source=RewardSource.EVALUATOR)  # fmt: skip
                    store.add_reward(rollout.id, reward)
            finally:
                if game is not None:
                    game.close()
            payload = {"environment": environment.name, "score": score, "opened": opened,
                       "process_id": game.process_id if game is not None else None}  # fmt: skip
            store.add_event(rollout.id, EventCreate(id=f"environment-{attempt}", attempt=attempt, kind="environment",
                                                    payload=payload))  # fmt: skip

        finished.__qualname__ = f"environment({environment.name})"
        app.state.attempt_finished_hooks.append(finished)
        inner = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(a: Any) -> AsyncIterator[Any]:
            try:
                async with inner(a) as state:
                    yield state
            finally:
                episodes.close_all()

        app.router.lifespan_context = lifespan

    return install


def record_call(store: Store, rollout_id: str, attempt: int, params: Any, result: dict[str, Any]) -> None:
    """One tool call as the server saw it: the tool, its arguments and what the game answered."""
    params = params if isinstance(params, dict) else {}
    text = "".join(str(c.get("text", "")) for c in result.get("content", []))[:MAX_RESULT_CHARS]
    arguments = json.dumps(params.get("arguments"))[:MAX_RESULT_CHARS]
    payload = {"tool": str(params.get("name"))[:200], "arguments": arguments, "result": text,
               "refused": bool(result.get("isError"))}  # fmt: skip
    store.add_event(rollout_id, EventCreate(attempt=attempt, kind="environment_call", payload=payload),
                    while_running=True)  # fmt: skip
