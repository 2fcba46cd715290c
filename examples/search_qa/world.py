"""Invented worlds for the search example: people, companies and towns no model has read about, and questions on them.

Every name is made of random syllables from a seed, so the answer cannot come from the model's memory: it is in
the corpus, one fact a sentence, and a question needs two of them (the bridge entity named in the first fact is
what the second search must ask about). The train and held-out worlds are built from disjoint name pools: no
person, company or town, and so no question, is in both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# Short, pronounceable syllables: the skill to learn is the two lookups, not spelling (about 3 tokens a word).
ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr", "st", "sh"]
VOWELS = ["a", "e", "i", "o", "u"]
CODAS = ["", "", "", "n", "r", "l", "s", "x"]
SEED = 0  # the seed of the committed task files (make_tasks.py)
COMPANY_KINDS = ["Forge", "Labs", "Foundry", "Trading", "Mills", "Systems", "Brewery", "Shipyards"]

# (question, first hop, second hop): the first hop goes from the entity in the question to the bridge entity,
# the second from the bridge to the answer.
TEMPLATES = [
    ("In which town was the person who founded {entity} born?", "founder", "born_in"),
    ("In which town is the company that {entity} works for based?", "employer", "based_in"),
    ("Who founded the company that {entity} works for?", "employer", "founder"),
    ("In which town is the company founded by {entity} based?", "founded", "based_in"),
]


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)).capitalize()


def name_pool(rng: random.Random, count: int) -> list[str]:
    """`count` distinct two-syllable words."""
    names: set[str] = set()
    while len(names) < count:
        names.add(word(rng, 2))
    return sorted(names)


@dataclass
class World:
    """People, companies and towns, each relation a dict from an entity to another."""

    people: list[str]
    companies: list[str]
    towns: list[str]
    born_in: dict[str, str] = field(default_factory=dict)  # person -> town
    employer: dict[str, str] = field(default_factory=dict)  # person -> company
    founder: dict[str, str] = field(default_factory=dict)  # company -> person
    based_in: dict[str, str] = field(default_factory=dict)  # company -> town

    def facts(self) -> list[str]:
        """The corpus: one sentence a fact."""
        return [
            *(f"{p} was born in {t}." for p, t in self.born_in.items()),
            *(f"{p} works for {c}." for p, c in self.employer.items()),
            *(f"{c} was founded by {p}." for c, p in self.founder.items()),
            *(f"{c} is based in {t}." for c, t in self.based_in.items()),
        ]

    def hop(self, relation: str, entity: str) -> str | None:
        """One relation from `entity`, or None where it has no single answer."""
        if relation == "founded":
            return next((c for c, p in self.founder.items() if p == entity), None)
        table = {"born_in": self.born_in, "employer": self.employer, "founder": self.founder, "based_in": self.based_in}
        return table[relation].get(entity)


def build_world(rng: random.Random, words: list[str], people: int, companies: int, towns: int) -> World:
    """A world from `words` (each used once): every person born somewhere and employed; every company founded."""
    need = 2 * people + companies + towns
    if len(words) < need:
        raise ValueError(f"a world of {people} people, {companies} companies and {towns} towns needs {need} words")
    it = iter(words)
    person_names = [f"{next(it)} {next(it)}" for _ in range(people)]
    company_names = [f"{next(it)} {rng.choice(COMPANY_KINDS)}" for _ in range(companies)]
    world = World(person_names, company_names, [next(it) for _ in range(towns)])
    founders = rng.sample(person_names, companies)  # each founder founds one company
    for company, person in zip(company_names, founders, strict=True):
        world.founder[company] = person
        world.based_in[company] = rng.choice(world.towns)
    for person in person_names:
        world.born_in[person] = rng.choice(world.towns)
        world.employer[person] = rng.choice(company_names)
    return world


def questions(world: World, rng: random.Random, count: int) -> list[dict[str, str]]:
    """`count` distinct two-hop questions (each with its bridge entity and answer), templates in turn."""
    asked: set[str] = set()
    tasks: list[dict[str, str]] = []
    attempts = 0
    while len(tasks) < count:
        attempts += 1
        if attempts > 100 * count:
            raise ValueError(f"this world has fewer than {count} distinct questions")
        text, first, second = TEMPLATES[len(tasks) % len(TEMPLATES)]
        entity = rng.choice(world.companies if first == "founder" else world.people)
        bridge = world.hop(first, entity)
        answer = world.hop(second, bridge) if bridge else None
        question = text.format(entity=entity)
        if bridge is None or answer is None or question in asked:
            continue
        asked.add(question)
        tasks.append({"question": question, "entity": entity, "bridge": bridge, "answer": answer})
    return tasks


@dataclass
class Splits:
    corpus: list[str]  # the facts of both worlds: one index serves train and validation
    train: list[dict[str, str]]
    val: list[dict[str, str]]
    train_world: World
    val_world: World


def make_splits(seed: int, train: int = 400, val: int = 128) -> Splits:
    """Two worlds from one seed, on disjoint halves of one name pool, and questions on each."""
    rng = random.Random(seed)
    words = name_pool(rng, 1400)
    rng.shuffle(words)
    train_world = build_world(rng, words[:700], people=240, companies=120, towns=60)
    val_world = build_world(rng, words[700:], people=240, companies=120, towns=60)
    corpus = train_world.facts() + val_world.facts()
    return Splits(corpus, questions(train_world, rng, train), questions(val_world, rng, val), train_world, val_world)
