"""Write the quickstart's task files: arithmetic questions in varied phrasings, train and held-out val."""

from __future__ import annotations

import json
import random
from pathlib import Path

PHRASES = [
    ("+", "What is {a} plus {b}?"),
    ("+", "Add {a} and {b}."),
    ("+", "What is the sum of {a} and {b}?"),
    ("-", "What is {a} minus {b}?"),
    ("-", "Subtract {b} from {a}."),
    ("-", "How much is {a} take away {b}?"),
    ("*", "What is {a} times {b}?"),
    ("*", "Multiply {a} by {b}."),
    ("*", "What is the product of {a} and {b}?"),
]
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def make_tasks(count: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    tasks = []
    for _ in range(count):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        op, phrase = rng.choice(PHRASES)
        tasks.append({"question": phrase.format(a=a, b=b), "answer": OPS[op](a, b)})
    return tasks


if __name__ == "__main__":
    here = Path(__file__).parent
    for name, count, seed in (("train", 400, 1), ("val", 64, 2)):
        lines = "".join(json.dumps(t) + "\n" for t in make_tasks(count, seed))
        (here / f"tasks_{name}.jsonl").write_text(lines)
