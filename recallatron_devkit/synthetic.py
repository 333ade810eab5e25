"""Deterministic synthetic memories and queries for load tests: varied,
realistic English text of every kind, with mentions, generated from a seed."""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

FIRST_NAMES = [
    "Ada", "Bruno", "Chen", "Dana", "Elif", "Farah", "Goran", "Hana", "Ivan", "Jia", "Kofi",
    "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vera",
    "Wen", "Yusuf", "Zoe", "Aiko", "Bilal", "Carmen", "Dmitri", "Esther", "Femi", "Greta",
    "Hiro", "Ines", "Jonas", "Kira", "Luis", "Mira", "Noor", "Oskar",
]  # fmt: skip
LAST_NAMES = [
    "Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Haddad", "Castillo", "Brennan",
    "Kowalski", "Mensah", "Rossi", "Sato", "Petrov", "Nguyen", "Silva", "Fischer", "Adeyemi",
    "Larsen", "Dubois", "Ortega", "Ibrahim", "Kaur", "Walsh", "Yilmaz", "Costa", "Berg",
    "Ivanova", "Park", "Mwangi", "Schmidt",
]  # fmt: skip
# A workspace knows many people (first + last name) and many projects.
PEOPLE = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
PROJECT_ADJECTIVES = [
    "Amber", "Blue", "Crimson", "Silent", "Golden", "Iron", "Northern", "Rapid", "Hidden",
    "Bright", "Quiet", "Wild",
]  # fmt: skip
PROJECT_NOUNS = [
    "Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Indigo",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Orchid", "Pioneer", "Quartz",
    "Redwood", "Sierra", "Tundra",
]  # fmt: skip
PROJECTS = [f"{a} {n}" for a in PROJECT_ADJECTIVES for n in PROJECT_NOUNS]
TOPICS = [
    "billing migration", "search latency", "onboarding flow", "quarterly budget",
    "vendor contract", "on-call rotation", "data retention policy", "mobile release",
    "customer churn", "hiring plan", "security audit", "design review", "API deprecation",
    "warehouse costs", "incident postmortem", "pricing page", "database upgrade",
    "accessibility fixes", "partner integration", "support backlog", "load testing",
    "feature flags", "localisation", "payment retries", "team offsite", "roadmap planning",
    "SSO rollout", "log retention", "cache invalidation", "release checklist",
]  # fmt: skip
ACTIONS = [
    "ship the beta", "freeze new features", "move to weekly releases", "hire two engineers",
    "drop the legacy endpoint", "switch vendors", "double the test coverage",
    "cut cloud spend by a fifth", "run a customer survey", "pause the migration",
    "adopt the new style guide", "publish the postmortem", "raise prices for new plans",
    "rotate all credentials", "split the monolith", "retire the old dashboard",
]  # fmt: skip
WHEN = [
    "by Friday", "before the end of the quarter", "next sprint", "in March", "by mid-April",
    "after the audit", "before the offsite", "this month", "by the next board meeting",
    "within two weeks",
]  # fmt: skip
OBSERVATIONS = [
    "the main risk is the timeline", "customers asked for clearer error messages",
    "the numbers look better than last month", "we still lack an owner for the follow-up",
    "legal wants a second review", "the team is stretched thin", "latency doubled under load",
    "nobody objected to the plan", "the estimate was too optimistic",
    "support tickets dropped after the fix", "we need data before deciding",
    "the vendor missed two deadlines", "the prototype impressed the sales team",
]  # fmt: skip
FACTS = [
    "runs on {n} services in the {region} region", "has {n} paying customers",
    "is owned by {person}", "stores data for {n} days", "releases every {n} days",
    "depends on the {project2} API", "costs about {n} thousand euros a month",
    "has an error budget of {n} minutes per month", "is written mostly in {lang}",
    "was last audited in {month}",
]  # fmt: skip
REGIONS = ["Frankfurt", "Dublin", "Virginia", "Singapore", "Sao Paulo", "Tokyo", "Oregon"]
LANGS = ["Python", "Go", "Rust", "TypeScript", "Kotlin", "Java"]
MONTHS = ["January", "March", "May", "July", "September", "November"]

QUERY_TEMPLATES = [
    "what did {person} decide about {project}",
    "{topic} status",
    "who owns {project}",
    "when will {project} {action}",
    "notes on the {topic}",
    "{project} {topic} risks",
    "summary of {topic}",
    "how much does {project} cost",
    "what is the plan for the {topic}",
    "{person} meeting about {topic}",
]  # fmt: skip


# Pseudo-words for rare terms: about RARE_SHARE of the memories carry a
# reference code, and each code is held by about RARE_DOCS memories, whatever
# the corpus size (the rare-term query class asks for them).
SYLLABLES = [
    "ka", "lo", "mi", "zu", "ren", "tor", "vas", "qui", "bel", "dro", "fen", "gha",
    "jup", "nix", "pra", "sol", "tek", "urb", "wyl", "xen",
]  # fmt: skip
RARE_SHARE = 0.3
RARE_DOCS = 6


def rare_word(k: int) -> str:
    """The k-th pseudo-word: four syllables, none an English word."""
    n = len(SYLLABLES)
    return "".join(SYLLABLES[(k // n**i) % n] for i in range(4))


def rare_vocabulary(count: int) -> int:
    """How many distinct rare words a corpus of `count` memories uses."""
    return max(1, int(count * RARE_SHARE / RARE_DOCS))


PURPOSE_SHARES = [("assist", 0.9), ("automate", 0.2), ("personalize", 0.2), ("audit", 0.1)]
PRIVATE_SHARE = 0.5


def _purposes(rng: random.Random) -> tuple[str, ...]:
    """Mostly assist; some memories are also (or only) for other purposes."""
    chosen = [p for p, share in PURPOSE_SHARES if rng.random() < share]
    return tuple(chosen) or ("assist",)


@dataclass(frozen=True)
class SyntheticMemory:
    kind: str
    title: str
    body: str
    mentions: list[str] = field(default_factory=list)
    # Index of earlier memories this one is derived from (empty: told).
    derived_from: tuple[int, ...] = ()
    # Who writes it (an index into the seeded members), whether only that
    # member may see it, and its purposes: row security has work to do.
    author: int = 0
    private: bool = False
    purposes: tuple[str, ...] = ("assist",)


def _fact(rng: random.Random, project: str) -> str:
    return rng.choice(FACTS).format(
        n=rng.randint(2, 400),
        region=rng.choice(REGIONS),
        person=rng.choice(PEOPLE),
        project2=rng.choice(PROJECTS),
        lang=rng.choice(LANGS),
        month=rng.choice(MONTHS),
    )


def memories(count: int, seed: int = 7, members: int = 1) -> Iterator[SyntheticMemory]:
    """`count` memories. With one member, every memory is the workspace's and
    for assist; with more, about PRIVATE_SHARE are private to their author and
    purposes vary (PURPOSE_SHARES), so a caller sees a part of the workspace.
    Derivations stay within what their author may see."""
    rng = random.Random(seed)
    trust_rng = random.Random(seed + 1)
    rare_rng = random.Random(seed + 2)
    vocabulary = rare_vocabulary(count)
    made: list[SyntheticMemory] = []
    for i in range(count):
        for m in _memory(rng, i):
            author = i % members
            private = members > 1 and trust_rng.random() < PRIVATE_SHARE
            purposes = _purposes(trust_rng) if members > 1 else ("assist",)
            body = m.body
            if rare_rng.random() < RARE_SHARE:
                body += f" Ref {rare_word(rare_rng.randrange(vocabulary))}."
            sources = m.derived_from
            if sources:
                # A derivation's author must see every source, and the
                # sources' purposes must meet (design §4); else it is told.
                shared = set(purposes)
                for j in sources:
                    src = made[j]
                    if src.private and src.author != author:
                        shared = set()
                    shared &= set(src.purposes)
                purposes = tuple(p for p, _ in PURPOSE_SHARES if p in shared)
                if not purposes:
                    sources = ()
                    purposes = _purposes(trust_rng) if members > 1 else ("assist",)
                private = private or any(made[j].private for j in sources)
            out = SyntheticMemory(
                m.kind, m.title, body, m.mentions, sources, author, private, purposes
            )
            made.append(out)
            yield out


def _memory(rng: random.Random, i: int) -> Iterator[SyntheticMemory]:
    person, other = rng.sample(PEOPLE, 2)
    project = rng.choice(PROJECTS)
    topic = rng.choice(TOPICS)
    roll = rng.random()
    if i >= 10 and i % 50 == 0:
        sources = (rng.randrange(i - 10, i), rng.randrange(i - 10, i))
        yield SyntheticMemory(
            "summary",
            f"Summary: {project} {topic}",
            f"Across recent notes, {project}'s {topic} keeps coming up; "
            f"{rng.choice(OBSERVATIONS)}, and {rng.choice(OBSERVATIONS)}.",
            [project],
            tuple(sorted(set(sources))),
        )
    elif roll < 0.3:
        action = rng.choice(ACTIONS)
        yield SyntheticMemory(
            "decision",
            f"{project}: {action}",
            f"{person} decided that {project} will {action} {rng.choice(WHEN)}, "
            f"after discussing the {topic} with {other}.",
            [person, project],
        )
    elif roll < 0.6:
        yield SyntheticMemory(
            "fact",
            f"{project} {topic}",
            f"{project} {_fact(rng, project)}; it {_fact(rng, project)}.",
            [project],
        )
    elif roll < 0.9:
        yield SyntheticMemory(
            "note",
            f"Call with {person} about the {topic}",
            f"Talked with {person} and {other} about the {topic} for {project}: "
            f"{rng.choice(OBSERVATIONS)}. Follow up {rng.choice(WHEN)}.",
            [person, other],
        )
    else:
        yield SyntheticMemory(
            "summary",
            f"Weekly summary for {project}",
            f"This week on {project}: the {topic} moved forward, "
            f"{rng.choice(OBSERVATIONS)}; next, {rng.choice(ACTIONS)} {rng.choice(WHEN)}.",
            [project],
        )


def queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(QUERY_TEMPLATES).format(
            person=rng.choice(PEOPLE),
            project=rng.choice(PROJECTS),
            topic=rng.choice(TOPICS),
            action=rng.choice(ACTIONS),
        )
        for _ in range(count)
    ]


# -- the query mix ---------------------------------------------------------------
# Four classes of query that stress recall differently: rare terms (a few
# matches in a large index), common terms (many matches to rank), an entity's
# name, and the natural-language questions above. Every class yields distinct
# queries so a run can avoid repeating one: a result or embedding cache must
# not make a figure look better than the index is.

QUERY_CLASSES = ("rare", "common", "entity", "question")

RARE_TEMPLATES = [
    "what was ref {word} about",
    "ref {word}",
    "{word}",
    "{word} {topic}",
    "anything about {word}",
    "who mentioned {word}",
]  # fmt: skip
COMMON_TEMPLATES = [
    "{topic}",
    "decided {topic}",
    "weekly summary {topic}",
    "{topic} follow up",
    "talked about the {topic}",
    "this week on the {topic}",
    "decided to {action}",
    "{action} {when}",
    "{topic} {action}",
    "{topic} and {topic2}",
    "{topic} {when}",
    "{topic}: {observation}",
    "{observation}",
    "{topic} {action} {when}",
]  # fmt: skip
ENTITY_TEMPLATES = [
    "{name}",
    "about {name}",
    "{name} notes",
    "anything on {name}",
    "{name} update",
    "latest on {name}",
]  # fmt: skip


def rare_words_used(count: int, seed: int = 7) -> list[str]:
    """The rare words that memories(count, seed) really contains, in order of
    first use. Replays memories()' own stream of rare draws (its rare_rng
    draws once per memory, plus once per code), so no memory text is built;
    a test checks this against the memories' bodies."""
    rng = random.Random(seed + 2)
    vocabulary = rare_vocabulary(count)
    used: dict[str, None] = {}
    for _ in range(count):
        if rng.random() < RARE_SHARE:
            used.setdefault(rare_word(rng.randrange(vocabulary)), None)
    return list(used)


def normal_query(query: str) -> str:
    """The form two queries are compared in: a cache that folds case and
    spaces would count "Ref X" and "ref  x" as one query, so we do too."""
    return " ".join(query.lower().split())


def _filled(template: str, values: dict[str, Sequence[str]], rng: random.Random) -> list[str]:
    """Every filling of `template` from `values` (two topics never the same),
    shuffled."""
    names = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    out = [
        template.format(**dict(zip(names, combo, strict=True)))
        for combo in itertools.product(*(values[n] for n in names))
        if not ("topic2" in names and combo[names.index("topic")] == combo[names.index("topic2")])
    ]
    rng.shuffle(out)
    return out


def _round_robin(lists: Sequence[Sequence[str]]) -> Iterator[str]:
    """One from each list in turn, skipping the exhausted ones: every
    template is in the mix from the start, and each list is used up."""
    for depth in range(max((len(x) for x in lists), default=0)):
        for items in lists:
            if depth < len(items):
                yield items[depth]


def _questions(rng: random.Random) -> Iterator[str]:
    """The existing question stream (queries()), read in order; a longer
    queries() starts with a shorter one, so a batch is cut from a longer call."""
    seed = rng.randrange(1 << 30)
    done = 0
    while True:
        batch = queries(max(1000, 2 * done), seed=seed)[done:]
        done += len(batch)
        yield from batch


def _class_stream(
    name: str, rng: random.Random, corpus_size: int, corpus_seed: int
) -> Iterator[str]:
    """The queries of one class, in mix order; finite except for questions."""
    base: dict[str, Sequence[str]] = {
        "topic": TOPICS,
        "topic2": TOPICS,
        "action": ACTIONS,
        "when": WHEN,
        "observation": OBSERVATIONS,
    }
    if name == "rare":
        words = rare_words_used(corpus_size, corpus_seed)
        values = {**base, "word": words}
        return _round_robin([_filled(t, values, rng) for t in RARE_TEMPLATES] if words else [])
    if name == "common":
        return _round_robin([_filled(t, base, rng) for t in COMMON_TEMPLATES])
    if name == "entity":
        # People and projects in turn, though there are five times as many people.
        return _round_robin(
            [
                _filled(t, {"name": names}, rng)
                for t in ENTITY_TEMPLATES
                for names in (PEOPLE, PROJECTS)
            ]
        )
    if name == "question":
        return _questions(rng)
    raise ValueError(f"unknown query class {name!r}; known: {', '.join(QUERY_CLASSES)}")


def query_mix(
    per_class: int,
    corpus_size: int,
    corpus_seed: int = 7,
    seed: int = 11,
    classes: Sequence[str] = QUERY_CLASSES,
) -> dict[str, list[str]]:
    """Up to `per_class` distinct queries of each class (fewer when a class
    has fewer: rare words in a small corpus), no query in two classes
    (compared by normal_query). Rare queries use only words that
    memories(corpus_size, corpus_seed) contains. Deterministic from the
    seeds; each class has its own stream, so choosing classes does not change
    another class's queries."""
    taken: set[str] = set()
    out: dict[str, list[str]] = {}
    for name in classes:
        if name in out:
            continue
        # A stream per class, from the seed and the class's name.
        stream = _class_stream(name, random.Random(f"{seed}:{name}"), corpus_size, corpus_seed)
        chosen: list[str] = []
        # Bounded: the question stream is endless and could, in principle, run dry.
        for q in itertools.islice(stream, 20 * per_class + 1000):
            if len(chosen) >= per_class:
                break
            key = normal_query(q)
            if key not in taken:
                taken.add(key)
                chosen.append(q)
        out[name] = chosen
    return out


def visible_share(
    count: int, seed: int = 7, members: int = 1, member: int = 0, purpose: str = "assist"
) -> float:
    """The share of memories(count, seed, members) that `member` recalling
    for `purpose` may see (design §4: the workspace's or its own, and for that
    purpose), by the generator's own audience and purposes."""
    if count <= 0:
        return 0.0
    seen = sum(
        1
        for m in memories(count, seed, members)
        if (not m.private or m.author == member) and purpose in m.purposes
    )
    return seen / count
