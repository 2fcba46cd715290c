"""Arithmetic word problems that need two calculator steps (GSM8K-like, generated), with train and held-out splits.

Each template chains two operations on three numbers. The splits draw their people and items from disjoint
lists and no (template, numbers) instance is in both, so a held-out problem is never a train problem reworded.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

NAMES = ["Ana", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea", "Milo", "Nia",
         "Omar", "Pia", "Quin", "Rosa", "Sami", "Tess", "Uma", "Vic", "Wes", "Yara"]  # fmt: skip
ITEMS = ["pens", "apples", "books", "cups", "shells", "stamps", "cards", "beads", "coins", "tiles", "bricks",
         "seeds", "nails", "socks", "plates", "ropes"]  # fmt: skip


@dataclass(frozen=True)
class Template:
    text: str
    answer: Callable[[int, int, int], int]
    ranges: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    steps: tuple[str, str]  # the two calculator calls, of a, b, c and the first call's result r


TEMPLATES = [
    Template("{name} has {a} boxes with {b} {item} in each and gives away {c} {item}. How many {item} are left? "
             "Multiply {a} by {b}, then subtract {c}.",
             lambda a, b, c: a * b - c, ((12, 60), (12, 60), (10, 99)), ("{a} * {b}", "{r} - {c}")),
    Template("{name} has {a} boxes with {b} {item} in each and buys {c} more {item}. How many {item} are there now? "
             "Multiply {a} by {b}, then add {c}.",
             lambda a, b, c: a * b + c, ((12, 60), (12, 60), (10, 99)), ("{a} * {b}", "{r} + {c}")),
    Template("{name} had {a} {item} and got {b} more. Each of the {item} costs {c} dollars. What are they worth in dollars? "
             "Add {a} and {b}, then multiply by {c}.",
             lambda a, b, c: (a + b) * c, ((20, 99), (20, 99), (3, 19)), ("{a} + {b}", "{r} * {c}")),
    Template("{name} had {a} {item} and sold {b} of them. Each of the rest weighs {c} grams. How many grams do they weigh? "
             "Subtract {b} from {a}, then multiply by {c}.",
             lambda a, b, c: (a - b) * c, ((60, 199), (10, 59), (3, 19)), ("{a} - {b}", "{r} * {c}")),
    Template("{name} packs {a} bags of {b} {item} each day for {c} days. How many {item} is that? "
             "Multiply {a} by {b}, then multiply by {c}.",
             lambda a, b, c: a * b * c, ((3, 19), (11, 49), (3, 9)), ("{a} * {b}", "{r} * {c}")),
]  # fmt: skip


def make_problems(count: int, seed: int, names: list[str], items: list[str], taken: set[tuple[int, ...]] | None = None):
    """`count` problems, templates in turn, names and items from the lists given; `taken` instances are skipped."""
    rng = random.Random(seed)
    seen = set(taken or ())
    problems: list[dict[str, object]] = []
    while len(problems) < count:
        index = len(problems) % len(TEMPLATES)
        template = TEMPLATES[index]
        a, b, c = (rng.randint(lo, hi) for lo, hi in template.ranges)
        if (index, a, b, c) in seen:
            continue
        seen.add((index, a, b, c))
        text = template.text.format(name=rng.choice(names), item=rng.choice(items), a=a, b=b, c=c)
        problems.append({"question": text, "answer": template.answer(a, b, c), "instance": [index, a, b, c]})
    return problems


def make_splits(seed: int, train: int = 400, val: int = 128) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Train and held-out problems: disjoint halves of NAMES and ITEMS, no instance in both."""
    held_out = make_problems(val, seed + 1, NAMES[1::2], ITEMS[1::2])
    taken = {tuple(p["instance"]) for p in held_out}  # type: ignore[arg-type]
    return make_problems(train, seed, NAMES[::2], ITEMS[::2], taken), held_out
