"""Deterministic synthetic memories and queries for load tests: varied,
realistic English text of every kind, with mentions, generated from a seed."""

from __future__ import annotations

import random
from collections.abc import Iterator
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


@dataclass(frozen=True)
class SyntheticMemory:
    kind: str
    title: str
    body: str
    mentions: list[str] = field(default_factory=list)
    # Index of earlier memories this one is derived from (empty: told).
    derived_from: tuple[int, ...] = ()


def _fact(rng: random.Random, project: str) -> str:
    return rng.choice(FACTS).format(
        n=rng.randint(2, 400),
        region=rng.choice(REGIONS),
        person=rng.choice(PEOPLE),
        project2=rng.choice(PROJECTS),
        lang=rng.choice(LANGS),
        month=rng.choice(MONTHS),
    )


def memories(count: int, seed: int = 7) -> Iterator[SyntheticMemory]:
    rng = random.Random(seed)
    for i in range(count):
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
