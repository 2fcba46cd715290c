"""Write the search example's corpus and task files from one seed: train and held-out worlds that share no name."""

from __future__ import annotations

import json
from pathlib import Path

from world import SEED, make_splits

if __name__ == "__main__":
    here = Path(__file__).parent
    splits = make_splits(SEED)
    (here / "corpus.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in splits.corpus))
    for name, tasks in (("train", splits.train), ("val", splits.val)):
        (here / f"tasks_{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
