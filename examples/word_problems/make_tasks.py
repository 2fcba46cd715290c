"""Write the word-problem task files from one seed: 400 train and 128 held-out problems."""

from __future__ import annotations

import json
from pathlib import Path

from problems import make_splits

SEED = 0

if __name__ == "__main__":
    here = Path(__file__).parent
    train, val = make_splits(SEED)
    for name, tasks in (("train", train), ("val", val)):
        (here / f"tasks_{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
