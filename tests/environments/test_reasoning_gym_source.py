"""reasoning-gym through the task-source interface: disjoint splits, its own scorer as the server's reward, and
the agent's ways around that scorer (a score it writes, a task it edits, an answer that is code) worth nothing."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest
import reasoning_gym
from alight_environments.sources.reasoning_gym import ReasoningGym

from alight.client import AlightClient
from alight.schemas import AttemptFinish, RewardCreate, RewardSource, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.run_store import open_run_store
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.config.sections import DatasetConfig
from alight_server.trainer.run.dataset import load_splits
from alight_server.trajectories.join import build_trajectory
from tests.server.train_cli import alight_train
from tests.server.trainer.samples_fixtures import model_call

pytestmark = pytest.mark.timeout(120)

# two one-digit terms: about 200 questions, so 100 training tasks repeat some and a naive validation draw would too
SMALL = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def dataset(**settings: Any) -> DatasetConfig:
    return DatasetConfig.model_validate({"source": "reasoning_gym", "task": "chain_sum", "config": SMALL, **settings})


def answer_of(task: dict[str, Any]) -> str:
    """The answer as reasoning-gym itself makes it, for the task's reference (the test's own regeneration)."""
    ref = task["reasoning_gym"]
    item = reasoning_gym.create_dataset(ref["task"], seed=ref["seed"], size=1, **ref["config"])[0]
    assert item["question"] == task["question"]
    return str(item["answer"])


def test_train_and_validation_share_no_question_even_where_the_family_repeats_itself() -> None:
    splits = load_splits(dataset(train=100, validation=30, seed=0), seed=7)
    train = [task["question"] for task in splits.train]
    val = [task["question"] for task in splits.val]
    assert (len(train), len(val)) == (100, 30)
    assert len(set(train)) < len(train)  # the family did repeat: the disjointness below is the source's doing
    assert not set(train) & set(val)
    for task in splits.train + splits.val:  # the question and what rebuilds it; never the answer
        assert (set(task), set(task["reasoning_gym"])) == ({"question", "reasoning_gym"}, {"task", "seed", "config"})
    assert load_splits(dataset(train=100, validation=30, seed=0), seed=99).val == splits.val  # dataset.seed rules


OVERLAPPING = """
class Overlapping:
    def splits(self, spec, seed):
        return [{"question": "1 + 1 ="}, {"question": "2 + 2 ="}], [{"question": "2 + 2 ="}]
"""


def test_a_source_whose_splits_share_a_task_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "overlapping.py").write_text(OVERLAPPING)
    config = DatasetConfig(source=f"{tmp_path}/overlapping.py:Overlapping", train=2)
    with pytest.raises(
        ValueError, match=r"1 task\(s\) in both train and validation, e.g. \{\"question\": \"2 \+ 2 =\"\}"
    ):
        load_splits(config, seed=0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"source": "reasoning_gim"}, r"no task source 'reasoning_gim'; installed: \[.*'reasoning_gym'"),
        ({"task": "chain_summ"}, r"reasoning-gym has no task family 'chain_summ'; it has \d+, e.g."),
        ({"source": "jsonl", "task": None}, r"dataset.train is 4: a file of tasks, or a count with a source:"),
    ],
)
def test_a_bad_source_or_family_name_says_what_exists(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_splits(dataset(train=4, **settings), seed=0)


def test_the_evaluator_names_a_source_that_exists() -> None:
    with pytest.raises(ValueError, match="no task source 'nope'"):
        create_app(ServerConfig(admin_key="alk_rg", db_url="sqlite://", evaluator={"source": "nope"}))


def test_the_reward_is_reasoning_gyms_score_and_nothing_the_agent_writes_moves_it(tmp_path: Path) -> None:
    tasks, _ = ReasoningGym().splits({"task": "chain_sum", "train": 2, "config": SMALL}, seed=3)
    [countdown], _ = ReasoningGym().splits({"task": "countdown", "train": 1}, seed=0)
    right, other = answer_of(tasks[0]), answer_of(tasks[1])
    marker = tmp_path / "pwned"
    attempts = {  # rollout: (task, the policy's last answer, a final reward the agent posts itself)
        "right": (tasks[0], right, None),
        "tagged": (tasks[0], f"Let me add.\n<answer>{right}</answer>", None),
        "wrong": (tasks[0], str(int(right) + 1), None),
        "claims-full-marks": (tasks[0], f"{int(right) + 1}\nscore: 1.0 <answer>correct</answer>", 1.0),
        # An unclosed last tag is still the answer: scoring the whole reply paid part credit for the tool's
        # output it quoted (chain_sum credits a reply that contains the answer), which a seed learned to farm.
        "unclosed-tag": (tasks[0], f"<answer>{right}", None),
        "unclosed-tag-after-the-sum": (tasks[0], f"calculator: {right}\n<answer>{int(right) + 1}", None),
        "answers-an-edited-task": (tasks[0], other if other != right else str(int(right) + 3), None),
        "code-as-answer": (countdown, f"__import__('pathlib').Path('{marker}').touch() or 1", None),
    }
    app = create_app(ServerConfig(admin_key="alk_rg", db_url=f"sqlite:///{tmp_path}/a.db",
                                  evaluator={"source": "reasoning_gym"}))  # fmt: skip
    with ServerThread(app) as url:
        client = AlightClient(url, api_key="alk_rg")
        client.create_rollouts([RolloutCreate(id=rid, task=task) for rid, (task, _, _) in attempts.items()])
        for start in client.claim_attempts(limit=len(attempts), ids=list(attempts)):
            rid = start.rollout.id
            _, reply, claimed = attempts[rid]
            app.state.store.add_model_call(model_call(0, [1], [2], rollout_id=rid, reply=reply))
            if claimed is not None:  # posted as the agent posts, with its attempt's token
                agent = AlightClient(url, api_key=start.token)
                agent.add_reward(rid, RewardCreate(attempt=1, value=claimed, final=True))
            client.finish_attempt(rid, 1, AttemptFinish(status="succeeded"))
        final = {rid: client.trajectory(rid).final_reward for rid in attempts}
        scored = {rid: [r.value for r in app.state.store.list_rewards(rid) if r.source == RewardSource.EVALUATOR]
                  for rid in attempts}  # fmt: skip
    assert scored == {"right": [1.0], "tagged": [1.0], "wrong": [0.0], "claims-full-marks": [0.0],
                      "unclosed-tag": [1.0], "unclosed-tag-after-the-sum": [0.0],
                      "answers-an-edited-task": [0.0], "code-as-answer": [0.0]}  # fmt: skip
    assert final == {rid: values[0] for rid, values in scored.items()}  # the evaluator's, not the agent's 1.0
    assert not marker.exists()


def test_the_scoring_worker_outlives_the_thread_that_started_it() -> None:
    source = ReasoningGym()
    [task], _ = source.splits({"task": "chain_sum", "train": 1, "config": SMALL}, seed=5)
    scores: list[float] = []
    workers: list[int] = []
    for _ in range(2):  # the server's hooks run on pool threads that come and go
        thread = threading.Thread(target=lambda: scores.append(source.score(task, answer_of(task))))
        thread.start()
        thread.join()
        workers.append(source._worker.process.pid)  # pyright: ignore[reportPrivateUsage, reportOptionalMemberAccess]
    assert scores == [1.0, 1.0]
    assert workers[0] == workers[1]  # one worker, not one killed with its thread and started again


def test_a_dropped_scoring_worker_ends_and_leaves_no_folder_behind() -> None:
    source = ReasoningGym()
    [task], _ = source.splits({"task": "chain_sum", "train": 1, "config": SMALL}, seed=5)
    assert source.score(task, answer_of(task)) == 1.0
    worker = source._worker  # pyright: ignore[reportPrivateUsage]
    assert worker is not None and Path(worker.home).is_dir()
    process, home = worker.process, Path(worker.home)
    del source, worker
    gc.collect()
    assert process.returncode is not None  # ended, not left to the machine
    assert not home.exists()


AGENT = """
import alight
from openai import OpenAI

def main(task):
    messages = [{"role": "user", "content": task["question"]}]
    OpenAI(max_retries=5).chat.completions.create(model="policy", messages=messages, max_tokens=8)
    alight.reward(1.0, final=True)  # the agent's own claim of full marks: the scorer's reward must win
"""


def test_alight_train_on_a_family_named_in_config_is_rewarded_by_its_own_scorer(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(AGENT)
    settings = ("dataset: {source: reasoning_gym, task: chain_sum, train: 4, validation: 2, seed: 0}\n"
                "evaluator: {source: reasoning_gym}\nsteps: 1\ngroup_size: 2\ntasks_per_step: 1\n"
                "validation: {every: 0, max_tasks: 1}\ncontroller: {preload: true}\noutput_dir: run\n")  # fmt: skip
    result = alight_train(tmp_path, settings)
    assert result.exit_code == 0, result.output
    store = open_run_store(tmp_path / "run")
    rollouts = store.list_rollouts()
    assert len(rollouts) >= 3  # a step's group of 2 and the validations'
    for rollout in rollouts:
        trajectory = build_trajectory(store, rollout.id, 1)
        ref = rollout.task["reasoning_gym"]
        family = reasoning_gym.create_dataset(ref["task"], seed=ref["seed"], size=1, **ref["config"])
        own = family.score_answer(trajectory.final_output.text.strip(), family[0])
        assert trajectory.final_reward == own != 1.0  # reasoning-gym's score of the policy's answer, not the agent's
