"""Write the ScienceWorld example's task files from the environment's own splits: train variations and dev ones."""

from __future__ import annotations

import json
import random
from pathlib import Path

from scienceworld import ScienceWorldEnv

# The four "find" tasks: short (5-10 gold steps on `easy`), scored in stages (moving to the right room, focusing
# on the right thing, putting it in the box), so a small model's partial progress shows in the reward.
TASKS = ["find-living-thing", "find-non-living-thing", "find-plant", "find-animal"]
SIMPLIFICATION = "easy"  # teleporting, doors open: what a 10-step episode can reach


def make_tasks(split: str, seed: int) -> list[dict[str, object]]:
    """Every variation ScienceWorld puts in `split` ("train" or "dev") for TASKS, in a seeded shuffle."""
    env = ScienceWorldEnv("", envStepLimit=1)
    try:
        tasks: list[dict[str, object]] = []
        for name in TASKS:
            env.load(name, 0, SIMPLIFICATION)
            variations = env.get_variations_train() if split == "train" else env.get_variations_dev()
            tasks += [{"task_name": name, "variation": v, "simplification": SIMPLIFICATION} for v in variations]
    finally:
        env.close()
    random.Random(seed).shuffle(tasks)
    return tasks


if __name__ == "__main__":
    here = Path(__file__).parent
    for split, name, seed in (("train", "train", 1), ("dev", "val", 2)):
        lines = "".join(json.dumps(t) + "\n" for t in make_tasks(split, seed))
        (here / f"tasks_{name}.jsonl").write_text(lines)
