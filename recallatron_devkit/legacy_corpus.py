"""What the generated old store (`legacy_fixture`) is made of: the first day
of its history, the names, places, phrases and needles its turns and records
are drawn from, the old kinds and statuses, and the properties of every shape
planted on one entity record with what each must become."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
# A gap longer than this opened a new session in the old store.
SESSION_GAP = timedelta(hours=2)

FIRST = [
    "Robin", "Maya", "Tomas", "Ines", "Kwame", "Lena", "Arjun", "Sofia", "Dmitri", "Hana",
    "Oskar", "Priya", "Mateo", "Yuki", "Elif", "Noah", "Amara", "Jonas", "Leila", "Felix",
    "Chiara", "Ravi", "Greta", "Tariq", "Nadia", "Bruno", "Sina", "Marek", "Aiko", "Emre",
]  # fmt: skip
LAST = [
    "Goodwin", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Castillo", "Brandt", "Iyer",
    "Novak", "Haddad", "Keller", "Sato", "Ferreira", "Walsh", "Kowalski", "Mensah",
]  # fmt: skip
PROJECTS = [
    "billing rewrite", "mobile onboarding", "search relaunch", "warehouse sensors",
    "quarterly planning", "design system", "data retention policy", "support bot",
    "invoice export", "release train", "garden shed build", "kitchen renovation",
    "marathon training", "tax filing", "conference talk", "podcast pilot",
]  # fmt: skip
PLACES = [
    "Lisbon", "Porto", "Berlin", "Utrecht", "Kyoto", "Montreal", "Nairobi", "Tallinn",
    "the office", "the co-working space", "the allotment", "the climbing gym",
]  # fmt: skip
ORGS = [
    "Northwind", "Acme Logistics", "Bluefin Bank", "Helios Energy", "Tern Studio",
    "Quillworks", "Fernhill School", "Orbit Health",
]  # fmt: skip
TOOLS = [
    "Postgres", "Kubernetes", "Grafana", "Figma", "Linear", "Terraform", "Sentry", "Notion",
    "Jenkins", "Redis",
]  # fmt: skip
VERBS = [
    "review", "ship", "draft", "schedule", "fix", "plan", "test", "migrate", "price", "sketch",
]  # fmt: skip
THINGS = [
    "the invoice template", "the deploy checklist", "the standup notes", "the budget sheet",
    "the API contract", "the flaky test", "the onboarding emails", "the dashboard",
    "the backup job", "the travel booking", "the dentist appointment", "the grant application",
    "the on-call rota", "the vendor contract", "the release notes", "the sprint board",
]  # fmt: skip
WHEN = [
    "on Monday", "before Friday", "next week", "after the retro", "by the end of the month",
    "tomorrow morning", "this afternoon", "before the board meeting",
]  # fmt: skip
USER_LINES = [
    "Can you remind me what we decided about {thing} for the {project}?",
    "{person} says we should {verb} {thing} {when}.",
    "I spoke with {person} in {place}; they want to {verb} {thing}.",
    "Note that {person} moved {thing} for the {project} to {when}.",
    "What did {person} say about {tool} last time?",
    "Let's {verb} {thing} {when}, and loop in {person}.",
    "The {project} is blocked on {thing}; {person} owns it.",
    "Please draft a message to {person} about the {project}.",
    "I prefer to {verb} {thing} in the morning, not late at night.",
    "{org} asked whether we can {verb} {thing} using {tool}.",
]
ASSISTANT_LINES = [
    "Noted: {person} will {verb} {thing} {when} for the {project}.",
    "Last time {person} said {tool} was fine for the {project}, with a caveat about cost.",
    "Here is a draft for {person}: the {project} needs {thing} {when}.",
    "You decided to {verb} {thing} {when}; {person} agreed in {place}.",
    "I found two earlier mentions of {thing}; both point to {person} at {org}.",
    "Understood. I will keep {thing} on the list for the {project}.",
    "{tool} should work for that; {person} set it up for {org} before.",
    "Summary so far: {thing}, the {project}, and a follow-up with {person} {when}.",
]
# Words used nowhere else, planted in single turns so a test can find them.
NEEDLES = [
    ("quetzalcoatlus", "The spare server key is taped inside the quetzalcoatlus poster frame."),
    ("marmalade", "Remember: the Wi-Fi password at the cabin is marmalade-wombat-42."),
    ("zeppelinfield", "Book the team offsite at the Zeppelinfield hall for the summer party."),
]

OLD_KINDS = ["fact", "preference", "decision", "procedure", "note", "summary"]
KIND_TO_NEW = {"preference": "fact", "procedure": "note"}
STATUS_WEIGHTS = {"confirmed": 70, "candidate": 15, "rejected": 8, "superseded": 7}
ENTITY_TYPES = ["person", "project", "place", "organisation", "tool"]
RELATION_VERBS = {
    "person": ["works_on", "knows", "works_at"],
    "project": ["uses", "part_of"],
    "organisation": ["based_in"],
    "place": ["near"],
    "tool": ["replaces"],
}
# Properties of every shape the old store allowed, planted on one entity
# record: (name as written, value, the attribute it must become or None,
# the claim's text or why there is no claim). Written out by hand, not
# computed, so that the migration is checked against an independent answer.
VARIED_PROPERTIES: list[tuple[str, Any, str | None, str]] = [
    ("Home City", "Lisbon", "home_city", "Lisbon"),
    ("founded", 1998, "founded", "1998"),
    ("languages", ["pt", "en"], "languages", '["pt", "en"]'),
    ("remote", True, "remote", "true"),
    ("homeOffice", {"floor": "2", "desk": 4}, "home_office", '{"desk": 4, "floor": "2"}'),
    ("2fa", "enabled", "attr_2fa", "enabled"),
    ("Ünïcode Näme", "Zoë", "unicode_name", "Zoë"),
    (
        "The Very Long Property Name That Somebody Typed Into The Old Store Once Upon A Time",
        "yes",
        "the_very_long_property_name_that_somebody_typed_into_the_old_sto",
        "yes",
    ),
    ("nickname", "", None, "empty value"),
    ("maiden_name", None, None, "no value (null)"),
    ("bio", "word " * 500, None, "value over 2000 characters"),
    ("★", "star", None, "attribute name with no letter or digit"),
]


# The least of each size: a turn for each needle word, an entity of each type.
LEAST = {"turns": len(NEEDLES), "items": 0, "entities": len(ENTITY_TYPES)}


def size_problem(turns: int, items: int, entities: int, prefix: str = "") -> str | None:
    """What is wrong with the sizes asked for, naming the parameter (with
    prefix, as the command's option) and its least value; None if nothing."""
    for name, value in (("turns", turns), ("items", items), ("entities", entities)):
        if value < LEAST[name]:
            return f"{prefix}{name} must be at least {LEAST[name]}, got {value}"
    return None
