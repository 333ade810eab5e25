"""Whom a pronoun in a claim stands for (services/gateway/capture.py, rule 6):
a claim naming a person by "he", "she", "him", "her", "his" or "hers" is
stored only when the pronoun's own sentence names one person before it, as a
subject ("Ada approved the budget and she signed it"); with none, or with
two who could be meant ("Ada's manager called; she approved ..."), who is
meant is unclear and nothing is stored."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_I = re.IGNORECASE

_PERSON_PRONOUN = re.compile(r"\b(?:[Hh](?:e|im|is|er|ers|imself|erself)|[Ss]he)\b")
# A name is a capitalised word other than a sentence's usual openers, a day or
# a month, or a role's acronym ("Dana", "CEO"; "API" and "Q3" name no one).
_ROLES = frozenset(
    {"CEO", "CTO", "CFO", "COO", "CIO", "CISO", "CMO", "CPO", "CSO", "VP", "SVP", "EVP", "PM"}
    | {"GM", "MD", "DPO", "SRE", "EM", "TL"}
)
_CALENDAR = re.compile(
    r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|January|February|March|April|May|June|July|"
    r"August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec"
)
_NOT_NAMES = frozenset(
    {"The", "A", "An", "It", "Its", "This", "That", "These", "Those", "There", "Our", "My"}
    | {"Your", "Their", "We", "I", "In", "On", "At", "For", "If", "When", "After", "Before"}
    | {"Since", "Until", "Every", "Each", "All", "Some", "No", "Once", "And", "But", "So"}
    | {"Then", "Now", "Today", "Tomorrow", "Yesterday", "Also", "Please", "Here", "Next"}
    | {"Last", "Later", "Both", "Everyone", "Everybody", "Someone", "Somebody", "Nobody"}
    | {"They", "You", "He", "She", "Him", "Her", "His", "Hers", "Where", "While", "As"}
)


def _a_name(word: str) -> bool:
    """Whether ``word`` may be the name of the person a pronoun stands for."""
    if not word[0].isupper() or word in _NOT_NAMES or _CALENDAR.fullmatch(word):
        return False
    return word in _ROLES or not (word.isupper() or len(word) == 1)


_PEOPLE = (
    r"(?:client|customer|user|manager|boss|lead|owner|(?:co-?)?founder|director|chair(?:man|woman)?|"
    r"president|head|landlord|landlady|tenant|neighbou?r|contractor|freelancer|consultant|"
    r"candidate|applicant|hire|recruit|intern|employee|engineer|developer|designer|architect|"
    r"analyst|admin|administrator|doctor|dentist|nurse|vet|therapist|teacher|tutor|professor|"
    r"lawyer|attorney|accountant|auditor|recruiter|assistant|secretary|receptionist|colleague|"
    r"co-?worker|teammate|partner|spouse|wife|husband|mother|father|mum|mom|dad|parent|son|"
    r"daughter|brother|sister|sibling|aunt|uncle|cousin|grand(?:mother|father|ma|pa)|niece|"
    r"nephew|friend|boyfriend|girlfriend|fianc\u00e9e?|fiancee?|kid|child|baby|guy|man|woman|"
    r"girl|boy|lady|gentleman|person|author|reviewer|tester|driver|plumber|electrician|cleaner|"
    r"nanny|babysitter|caretaker|courier|mentor|mentee|coach|trainer|student|patient|guest|"
    r"visitor|sponsor|investor|buyer|seller|rep|representative|officer|inspector|judge|pilot|"
    r"chef|waiter|waitress)"
)
_PERSON_NOUN = re.compile(
    rf"\b(?:(?:the|our|my|your|their|this|that)\s+(?:[\w'\-]+\s+){{0,2}}?|"
    rf"[^\W\d_][\w\-]*'s\s+(?:[\w'\-]+\s+)?)(?P<noun>{_PEOPLE})\b",
    _I,
)
_NOT_OWNED = re.compile(
    r"\s*(?:$|[^\w\s]|(?:the|a|an|this|that|these|those|now|today|tomorrow|yesterday|again|"
    r"too|also|back|here|there|about|on|in|at|for|to|from|with|by|and|or|but|as|if|when|until|"
    r"later|soon|first|last|next|every|each|some|all|no|personally|directly|up|down|off|out|"
    r"over|know)\b)",
    re.IGNORECASE,
)
_TO_HER = re.compile(
    r"\b(?:g[ai]ve|giv(?:es|ing)|sen[dt]s?|show(?:s|ed)?|t[eo]ld|tells|offer(?:s|ed)?|"
    r"ow(?:e|es|ed)|pa(?:y|ys|id)|len[dt]s?|hand(?:s|ed)?|b(?:uy|uys|ought)|br(?:ing|ings|ought)|"
    r"ask(?:s|ed)?|ma(?:ke|kes|de)|g[eo]ts?|leaves?|left|promis(?:e|es|ed)|call(?:s|ed)?|"
    r"e-?mail(?:s|ed)?|text(?:s|ed)?|s[eo]ll?s?|sold|f[io]u?nds?|t(?:each|aught)|"
    r"charge[sd]?|let|lets|allow(?:s|ed)?|wish(?:es|ed)?)\s+$",
    re.IGNORECASE,
)

# A sentence ends at a stop, a '!', a '?' or a ';' before a space.
_SENTENCE_END = re.compile(r"[.!?;]\s+")
_TOKEN = re.compile(r"[^\W\d_][\w\-]*(?:'s\b)?")
# A capitalised word after these is a place, not a person ("moved to Lisbon",
# "in Porto"); after "to" only when it follows a move ("reports to Sam" names one).
_PLACE_BEFORE = re.compile(
    r"(?:\b(?:in|at|near|into|across|around|through|inside|outside|within|towards?)|"
    r"\b(?:mov(?:e|es|ed|ing)|w[eo]nt|go(?:es|ing)?|flew|fl(?:y|ies)|dr(?:ove|ives?)|"
    r"travel(?:s|l?ed)?|relocat(?:e|es|ed)|c[ao]me|comes|back|return(?:s|ed)?|head(?:s|ed)?)"
    r"\s+to)\s+$",
    _I,
)
# Between two mentions of one person: "my manager is Dana Lee", "Ada, our lead".
_SAME_PERSON = re.compile(r"\s+(?:is|was)\s+|\s*,\s*", _I)
# Where a clause begins: a subject follows.
_CLAUSE_START = re.compile(
    r"[,:(\u2014\u2013]|\b(?:and|but|or|so|then|while|because|when|where|who|although|"
    r"though|once|until|since|after|before|whereas|that)\b",
    _I,
)
_TIME = (
    rf"(?:{_CALENDAR.pattern}|\d[\w:]*|week|weekend|month|year|quarter|morning|afternoon|"
    r"evening|night|today|tomorrow|yesterday|now)"
)
# What may come before a subject in its clause: when ("On Monday", "Every
# Friday,") and the words of its noun phrase ("our new").
_BEFORE_SUBJECT = re.compile(
    r"\s*(?:(?:(?:on|in|from|since|every|each|this|next|last|by|until|after|before|at|during)"
    rf"\s+(?:[\w']+\s+){{0,2}}?{_TIME}|today|tomorrow|yesterday|now|then|also|still)"
    r"\s*,?\s*)?(?:(?:the|our|my|your|their|this|that|new|former|current|old)\s+)*",
    _I,
)
_BESIDE = re.compile(r"\s+(?:and|or|nor|&)\s+")
# The run of capitalised words a named mention ends with ("Dana Lee").
_LAST_NAME = re.compile(r"[A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)*$")


@dataclass
class _Mention:
    start: int
    end: int
    keys: set[str]
    named: bool  # a name, not only a person noun


def _mentions(claim: str, start: int, end: int) -> list[_Mention]:
    """The people named in ``claim[start:end]``, in order: runs of names and
    person nouns, one mention per person noun and per run of names."""
    found: list[_Mention] = []
    run: _Mention | None = None
    for token in _TOKEN.finditer(claim, start, end):
        word = token.group(0).removesuffix("'s")
        joined = run is not None and claim[run.end : token.start()] == " "
        place = _PLACE_BEFORE.search(claim, max(start, token.start() - 30), token.start())
        if not _a_name(word) or (not joined and place):
            run = None
            continue
        if joined and run is not None:
            run.end = token.end()
            run.keys = {f"{next(iter(run.keys))} {word.lower()}"}
        else:
            run = _Mention(token.start(), token.end(), {word.lower()}, True)
            found.append(run)
        if token.group(0).endswith("'s"):
            run = None
    for noun in _PERSON_NOUN.finditer(claim, start, end):
        found.append(_Mention(noun.start(), noun.end(), {noun.group("noun").lower()}, False))
    found.sort(key=lambda mention: mention.start)
    return found


def _add(claim: str, people: list[_Mention], mention: _Mention) -> None:
    """Counts ``mention`` among ``people``: one said to be the last ("my
    manager is Dana Lee", "Ada, our lead") or named before counts once."""
    last = people[-1] if people else None
    if last is not None and mention.start < last.end:
        # A person noun after a possessive name ("Ada's manager") is another person.
        if not mention.keys <= last.keys:
            people.append(mention)
        return
    gap = claim[last.end : mention.start] if last else ""
    same = last is not None and _SAME_PERSON.fullmatch(gap) is not None
    if same and "," in gap and mention.named and last is not None and last.named:
        same = False  # "Ada, Bob and Eve" are three
    if same and last is not None:
        last.keys |= mention.keys
        last.named |= mention.named
        last.end = mention.end
    elif not any(person.keys & mention.keys for person in people):
        people.append(mention)


def _as_subject(claim: str, sentence: int, mention: _Mention) -> bool:
    """Whether ``mention`` opens its clause: nothing but when and its noun
    phrase's words before it ("On Monday Dana", "our CFO", "when Ada")."""
    clause = sentence
    for mark in _CLAUSE_START.finditer(claim, sentence, mention.start):
        clause = mark.end()
    return _BEFORE_SUBJECT.fullmatch(claim, clause, mention.start) is not None


def _stands_for_a_person_noun(claim: str, person: _Mention, pronoun: re.Match[str]) -> bool:
    """Whether a person noun may be whom ``pronoun`` means: it is a subject, a
    reflexive or an owner's pronoun, not an object ("called him") or predicate,
    nor beside the noun ("the intern and he")."""
    word = pronoun.group(0).lower()
    if word in ("he", "she"):
        return not _BESIDE.fullmatch(claim, person.end, pronoun.start())
    if word in ("himself", "herself"):
        return True
    if word not in ("his", "her") or _NOT_OWNED.match(claim, pronoun.end()):
        return False
    return word == "his" or not _TO_HER.search(claim, max(0, pronoun.start() - 20), pronoun.start())


def _beside(claim: str, sentence: int, person: _Mention, pronoun: re.Match[str]) -> bool:
    """Whether ``pronoun`` names someone beside ``person`` ("Ada and he share",
    "shared by Ada and him"): another person, whom the turn does not name. A
    subject pronoun is beside a subject only ("my manager is Dana Lee and she
    ..." opens a clause); an owner's pronoun there is the person's ("Ada and her
    brother")."""
    if not _BESIDE.fullmatch(claim, person.end, pronoun.start()):
        return False
    word = pronoun.group(0).lower()
    if word in ("he", "she"):
        name = _LAST_NAME.search(claim, sentence, person.end) if person.named else None
        return _as_subject(
            claim, sentence, _Mention(name.start() if name else person.start, 0, set(), False)
        )
    return word != "his" and (word != "her" or _NOT_OWNED.match(claim, pronoun.end()) is not None)


def unnamed_person(claim: str) -> str | None:
    """The first pronoun in ``claim`` whose sentence does not name, before it,
    exactly one person as a subject, if any. Each mention and clause mark is
    read once, so a turn of any length costs time linear in it."""
    starts = [0] + [end.end() for end in _SENTENCE_END.finditer(claim)]
    mentions = _mentions(claim, 0, len(claim))
    sentence, people, subject, next_mention = -1, list[_Mention](), False, 0
    for pronoun in _PERSON_PRONOUN.finditer(claim):
        start = starts[bisect.bisect_right(starts, pronoun.start()) - 1]
        if start != sentence:
            sentence, people = start, []
            while next_mention < len(mentions) and mentions[next_mention].start < start:
                next_mention += 1
        while next_mention < len(mentions) and mentions[next_mention].end <= pronoun.start():
            first = people[0] if people else None
            _add(claim, people, mentions[next_mention])
            next_mention += 1
            if people and people[0] is not first:
                subject = _as_subject(claim, sentence, people[0])
        if len(people) != 1 or not subject or _beside(claim, sentence, people[0], pronoun):
            return pronoun.group(0)
        if not people[0].named and not _stands_for_a_person_noun(claim, people[0], pronoun):
            return pronoun.group(0)
    return None
