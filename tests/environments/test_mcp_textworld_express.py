"""TextWorldExpress served as MCP tools: its real games (a JVM each) answering MCP messages, its seeds as the tasks.

The HTTP route, the attempt token and the reward hook are the environment-independent host's, driven end to end
with ScienceWorld in test_mcp_scienceworld.py; here the same `Episodes` and MCP handler play TextWorldExpress.
"""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

import psutil
import pytest
from fastapi import HTTPException

if shutil.which("java") is None or importlib.util.find_spec("textworld_express") is None:
    pytest.skip("java or textworld-express missing: bash scripts/setup.sh --scienceworld", allow_module_level=True)

from alight_environments.mcp.host import Episodes
from alight_environments.mcp.protocol import answer
from alight_environments.mcp.textworld_express import TextWorldExpress

# A dev seed of the coin game on three rooms without doors: the package's own solution is these three actions.
TASK = {"game": "coin", "seed": 10000, "fold": "dev", "params": "numLocations=3,numDistractorItems=0,includeDoors=0"}


def call(episodes: Episodes, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    reply = answer(message, lambda: episodes.tools("r1", 1, TASK), "test")
    assert reply is not None
    return reply["result"]


def test_a_game_is_played_through_mcp_and_scored_by_the_package_and_its_jvm_ends_with_it() -> None:
    episodes = Episodes(TextWorldExpress(), {"max_steps": 5})
    try:
        assert call(episodes, "observe", {})["content"][0]["text"].startswith("Your task is to search")
        valid = call(episodes, "valid_actions", {})["content"][0]["text"].splitlines()
        assert "look around" in valid
        assert call(episodes, "score", {})["content"][0]["text"] == "0"
        for action in ("look around", "move east", "take coin"):
            assert not call(episodes, "act", {"action": action})["isError"]
        assert call(episodes, "act", {"action": "look around"})["isError"]  # the episode is over
    finally:
        game = episodes.pop("r1", 1)  # the attempt ended
    assert game is not None and game.score() == 1.0  # the package's own score for the solved game
    game.close()
    assert game.process_id and not psutil.pid_exists(game.process_id)
    with pytest.raises(HTTPException) as late:  # a call that raced the end opens no second game
        call(episodes, "observe", {})
    assert late.value.status_code == 409


def test_the_tasks_are_the_games_own_train_and_dev_seeds_disjoint() -> None:
    train, validation = TextWorldExpress().splits({"config": {"task": "coin"}, "train": 50, "validation": 10}, 0)
    assert len(train) == 50 and len(validation) == 10
    assert {t["fold"] for t in train} == {"train"} and {t["fold"] for t in validation} == {"dev"}
    assert not {t["seed"] for t in train} & {t["seed"] for t in validation}
    assert not [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]
