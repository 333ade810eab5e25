"""Capture (design §8.2): from one conversation turn, a memory only when the person
plainly tells the assistant to remember or record something. Rules, not a
model, and conservative on purpose: a missed capture costs a retyped
sentence, a wrong one puts a false claim into memory. So anything empty,
hedged, hypothetical, a question, negated, or unclear about what to store is
a no-op with the reason.

The rules, in order:
1. nothing but whitespace, punctuation or filler -> empty;
2. a question (a '?', an opening question word or a closing tag: ", right")
   -> question;
3. a conditional or imagined case (if, suppose, what if, would, ...) -> hypothetical;
4. a hedge anywhere (maybe, I think, not sure, probably, ...), or a claim
   relayed from someone else (Alice said, according to Bob, ...) -> hedged;
5. no opening directive (remember that, note that, record that, don't forget
   that, for the record, ...), a negated one, or a claim the turn takes back or
   corrects in a later clause ("No, Monday.", "I mean ...", "Or not.") -> no request;
6. the directive's object is missing -> empty; it points outside the turn
   (this, that, it, what we said), asks for a reminder (remember to ...),
   names a particular person as audience or is addressed to others ("cc Bob",
   "@bob"), names a person by a pronoun its sentence does not name one person for, as a
   subject, before it ("the lead is her", "Ada's manager called; she ..."), or is under
   three words -> ambiguous.
Only what passes all six is stored.

Phrases closing a turn ("..., remember that", "just for me") are looked for in
its last TAIL characters, a request to share ("tell the team") in its last
clause: a turn of any length is decided in time linear in its length.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from recallatron import errors
from recallatron.vocabulary import request_id_fault
from services.gateway.capture_doubts import (
    CONDITIONAL,
    HEDGE,
    NEGATED,
    QUESTION_MARK,
    QUESTION_WORDS,
    REVISED,
    WITHDRAWN,
    audience_doubt,
    fold,
    question_tag,
)
from services.gateway.capture_ids import MAX_RESTATED as MAX_RESTATED
from services.gateway.capture_ids import request_id_for as request_id_for
from services.gateway.capture_ids import restated_id as restated_id
from services.gateway.capture_ids import said_alike as said_alike
from services.gateway.capture_ids import turn_key as turn_key
from services.gateway.capture_pronouns import unnamed_person
from services.gateway.capture_relayed import second_hand
from services.gateway.capture_title import MAX_TITLE_CHARS as MAX_TITLE_CHARS
from services.gateway.capture_title import capitalised, opened, title, unquoted

MIN_CONTENT_WORDS = 3
# Anchored at the end but tried from every position, a closing phrase's pattern
# backtracks quadratically over a long run of punctuation (20,000 commas: half a
# minute holding the interpreter lock, every call of the gateway waiting).
TAIL = 300

# Categories of the outcome; the first is the only one that stores.
STORE = "store"
EMPTY = "empty"
QUESTION = "question"
HYPOTHETICAL = "hypothetical"
HEDGED = "hedged"
NO_REQUEST = "no_request"
AMBIGUOUS = "ambiguous"

SPEAKER = "speaker"
WORKSPACE = "workspace"


@dataclass(frozen=True)
class Capture:
    store: bool
    category: str
    reason: str
    kind: str = ""
    title: str = ""
    body: str = ""
    # SPEAKER (only the person who spoke) unless the turn says the team.
    audience: str = SPEAKER


_ASKS = "a question: it asks, it does not state anything to store"


def _no(category: str, reason: str) -> Capture:
    return Capture(False, category, reason)


_I = re.IGNORECASE

# Openers that carry no meaning of their own ("OK, so, please remember ...");
# matched at a position (no "^"), so stripping many is linear.
_FILLER = re.compile(
    r"(?:ok(?:ay)?|alright|all right|so|also|and|hey|hi|hello|great|thanks|thank you|"
    r"please|pls|oh|well|one more thing|btw|by the way|assistant|right|cool|fyi)\b[\s,.:;!\-]*",
    _I,
)
# Directives at the start of the turn. Each maps to (kind, rest of the turn).
_DECISION_WORDS = r"(?:the |our |this |a )?decision"
_DIRECTIVES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(?:please\s+)?(?:don'?t|do not) forget(?:\s+that\b|\s*:|\s*,)", _I), "fact"),
    (
        re.compile(
            r"^(?:i (?:want|need) you to|i'?d like you to)\s+"
            r"(?:remember|note|record|keep in mind)(?:\s+that\b|\s*:)",
            _I,
        ),
        "fact",
    ),
    (
        re.compile(
            rf"^(?:please\s+)?(?:record|log|note|remember|save)\s+{_DECISION_WORDS}"
            r"(?:\s+that\b|\s*:)",
            _I,
        ),
        "decision",
    ),
    (re.compile(r"^(?:please\s+)?for the record\s*[,:\-]", _I), "fact"),
    (
        re.compile(
            r"^(?:please\s+)?(?:do\s+)?remember(?:\s+(?:this|the following))?"
            r"(?:\s+for\s+(?:the\s+(?:whole\s+)?team|everyone|all of us|me))?(?:\s+that\b|\s*:)",
            _I,
        ),
        "fact",
    ),
    (re.compile(r"^(?:please\s+)?keep in mind(?:\s+that\b|\s*:)", _I), "fact"),
    (
        re.compile(
            r"^(?:please\s+)?(?:record|log|store|save)(?:\s+(?:this|the fact))?(?:\s+that\b|\s*:)",
            _I,
        ),
        "fact",
    ),
    (
        re.compile(
            r"^(?:please\s+)?(?:add|save|put|commit)\s+(?:this\s+)?(?:to|in|into)\s+"
            r"(?:your\s+|the\s+)?memory(?:\s+that\b|\s*:)",
            _I,
        ),
        "fact",
    ),
    (
        re.compile(
            r"^(?:please\s+)?(?:make|take|add|jot down|write down|leave)\s+(?:a\s+)?note"
            r"(?:\s+(?:of this|for (?:the\s+(?:whole\s+)?team|everyone|me)))?(?:\s+that\b|\s*:)",
            _I,
        ),
        "note",
    ),
    (
        re.compile(
            r"^(?:please\s+)?(?:note|jot down|write down)(?:\s+down)?"
            r"(?:\s+for\s+(?:the\s+(?:whole\s+)?team|everyone|me))?(?:\s+that\b|\s*:)",
            _I,
        ),
        "note",
    ),
    # "Remember <claim>" without "that": accepted only when the rest is a claim
    # (checked below: not "remember to ...", "remember when ...").
    (re.compile(r"^(?:please\s+)?(?:do\s+)?remember\b[\s,]*", _I), "fact"),
]

# A directive verb whose object is not a stated claim ("Record it", "Note what we said").
_DIRECTIVE_VERB = re.compile(
    r"^(?:please\s+)?(?:remember|note|record|save|store|log|keep|make a note|jot down|"
    r"write down)\b",
    _I,
)
_TEAM_IN_DIRECTIVE = re.compile(r"\bfor (?:the (?:whole )?team|everyone|all of us)\b", _I)
# The same directives after the claim, past a punctuation mark: "<claim>, please
# remember that." (without the mark, "You need not note that" would store its head).
_SEPARATORS = ",;:.!-\u2013\u2014"
_TRAILING = re.compile(
    r"[,;:.!\-\u2013\u2014]\s*(?:so\s+)?(?:please\s+)?"
    r"(?P<directive>(?:remember|note|record|log|save|store)\s+(?:that|this|it)"
    r"(?:\s+for\s+(?:the\s+(?:whole\s+)?team|everyone|all of us))?|"
    r"make a note of (?:that|this|it)|keep (?:that|this|it) in mind|for the record)[\s.!]*$",
    _I,
)
_TEAM_PREFIX = re.compile(
    r"^(?:for (?:the (?:whole )?team|everyone|all of us|the workspace)|team-wide|workspace-wide)"
    r"\s*[,:\-]?\s*",
    _I,
)
_PRIVATE_PREFIX = re.compile(r"^(?:(?:just|only) for me|privately|for me)\s*[,:\-]?\s*", _I)
# "Remember for Bob and Ana that ...", "Remember for Bob, ...": an audience we
# cannot resolve to a member ("for the record" is a directive, not a person).
_OTHER_PREFIX = re.compile(
    r"^for\s+(?P<who>(?!(?:the record|example|instance)\b)"
    r"[\w']+(?:(?:\s*,\s*|\s+)[\w']+){0,4}?)\s*(?:that\b|:|,)",
    _I,
)
_SHARE_SUFFIX = re.compile(
    r"(?:[,;.:\u2013\u2014]\s*|\s+-{1,2}\s+|\s+and\s+)(?:and\s+)?(?:please\s+)?"
    r"(?:(?:share|show)\s+(?:it\s+|this\s+|that\s+)?with|"
    r"(?:send|forward|pass|give|copy)\s+(?:it|this|that)\s+(?:on\s+)?to|"
    r"tell|let|remind|inform|notify)\s+"
    r"(?P<who>[\w' ]+?)(?:\s+know)?[\s.!]*$",
    _I,
)
# ", for Bob and Dana", ", just for Bob", ", for me and Bob" at the end: people
# by name (capitalised; "for the holiday" says why, not who).
_NAMED_SUFFIX = re.compile(
    r"[,;:\-\u2013\u2014]\s*(?:and\s+)?(?i:(?:just\s+|only\s+)?for)\s+"
    r"(?P<who>(?:(?i:me)\s+(?i:and)\s+)?[A-Z][\w']*"
    r"(?:(?:\s*,\s*|\s+(?i:and)\s+|\s+)[A-Z][\w']*){0,4})[\s.!]*$"
)
# A team phrase at the end shares the memory only when set apart from the
# claim (", for everyone"): "mandatory for everyone" is what the claim says.
_AUDIENCE_SUFFIX = re.compile(
    r"(?:\s*[,;\-\u2013\u2014]\s*(?P<team>for (?:the (?:whole )?team|everyone|all of us)|"
    r"team-wide|workspace-wide)|"
    r"[\s,;\-]*(?P<knows>so (?:that )?(?:everyone|the (?:whole )?team) knows)|"
    r"[\s,;\-]*(?:(?:just|only) for me|privately|for my eyes only|keep it private))[\s.!]*$",
    _I,
)
_TEAM_WORDS = re.compile(
    r"^(?:the (?:whole )?team|everyone|everybody|all of us|the workspace)$", _I
)
_SELF_WORDS = re.compile(r"^(?:me|myself)$", _I)

# Objects that point outside the turn, or are not a claim.
_DEICTIC = re.compile(
    r"^(?:this|that|it|these|those|they|them|he|she|him|her|his|its|their|"
    r"the above|above|the same|same|what|whatever|everything|anything|something|"
    r"all (?:of )?(?:this|that|it)|the last|my last|the previous|earlier|as discussed|"
    r"as i said|as we said|the thing|the stuff|stuff|things)\b",
    _I,
)
_REMINDER = re.compile(r"^(?:to|when|where|why|how|who|whom|which|whether|me|us)\b", _I)
_DECISION_CONTENT = re.compile(
    r"^(?:we|i|the team|they|everyone)\s+(?:have\s+|'ve\s+|all\s+)?"
    r"(?:decided|agreed|chose|settled on|are going with|'re going with|will go with|picked)\b|"
    r"^(?:the\s+)?decision\s*(?:is|was|:)",
    _I,
)
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
# Punctuation before the claim's first word, up to the last space in it
# (". . . the deploy window ..."); ".NET" keeps its dot.
_LEADING_MARKS = re.compile(r"[\s,;:.!\-\u2013\u2014\u2026\"'\u201c\u201d]*\s")
# What a name to share with is made of.
_LAST_CLAUSE = re.compile(r"[\w' ]*")
# Typographic and modifier apostrophes read as plain ones ("don\u2019t" is "don't").
_APOSTROPHES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'"})


def _strip_fillers(text: str) -> str:
    pos = 0
    while match := _FILLER.match(text, pos):
        pos = match.end()
    return text[pos:].lstrip()


def _at_end(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The leftmost match of an end-anchored ``pattern`` starting in the last
    TAIL characters of ``text`` before its closing spaces, dots and '!'."""
    return pattern.search(text, max(0, len(text.rstrip(" .!")) - TAIL))


def _share_request(content: str) -> re.Match[str] | None:
    """A request to share at the end ("..., tell the team"): whom it names
    runs to the end (letters, digits, apostrophes, spaces), so it starts at
    most three characters (" --") before that last clause; from there each start is a
    match or fails at once."""
    end = len(content.rstrip(" .!"))
    clause = _LAST_CLAUSE.match(content[:end][::-1])
    return _SHARE_SUFFIX.search(content, max(0, end - (clause.end() if clause else 0) - 3))


def _trailing(opening: str) -> tuple[str, str] | None:
    """(directive, the claim before it) for a turn closing with a request to
    remember; the claim ends before the run of marks and spaces ahead of it."""
    match = _at_end(_TRAILING, opening)
    if match is None:
        return None
    head = opening[: match.start()]
    cut = len(head[: len(head.rstrip(_SEPARATORS))].rstrip())
    if cut == 0 and match.start() == 0:
        return None
    return match.group("directive"), opening[: max(cut, 1)]


def _claim_start(rest: str) -> str:
    """The claim without the marks and spaces before its first word, nor
    quotes around it or left without a partner at either end."""
    marks = _LEADING_MARKS.match(rest)
    return unquoted(rest[marks.end() :] if marks else rest)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _named_audience(who: str) -> Capture:
    # A person named as audience cannot be resolved to a member from the text.
    return _no(
        AMBIGUOUS, f"names a particular audience ('{who}'): use remember with that member's id"
    )


def _directive(opening: str) -> tuple[str, str, str] | None:
    """(kind, directive, the rest) for a turn that opens or closes with a
    request to remember or record; None otherwise."""
    for pattern, kind in _DIRECTIVES:
        match = pattern.match(opening)
        if match:
            return kind, match.group(0), opening[match.end() :]
    trailing = _trailing(opening)
    if trailing:
        directive, content = trailing
        kind = "note" if "note" in directive.lower() else "fact"
        return kind, directive, content
    return None


def decide(text: str) -> Capture:
    """What one turn asks to store, if anything. Plain and deterministic."""
    flat = " ".join(text.translate(_APOSTROPHES).split())
    if not _words(flat):
        return _no(EMPTY, "empty turn: nothing to store")
    opening = _strip_fillers(flat)
    if not _words(opening):
        return _no(EMPTY, "only filler words: nothing to store")
    folded = fold(flat)
    if QUESTION_MARK.search(flat) or QUESTION_WORDS.match(fold(opening)) or question_tag(folded):
        return _no(QUESTION, _ASKS)
    if hypothetical := CONDITIONAL.search(folded):
        return _no(
            HYPOTHETICAL,
            f"hypothetical ('{hypothetical.group(0)}'): a conditional or imagined case is not "
            "a claim to store",
        )
    if hedge := HEDGE.search(folded):
        return _no(HEDGED, f"hedged ('{hedge.group(0)}'): only plainly stated claims are stored")
    if NEGATED.search(fold(opening)):
        return _no(NO_REQUEST, "asks not to store anything")
    if withdrawn := WITHDRAWN.search(folded):
        return _no(NO_REQUEST, f"takes its claim back ('{withdrawn.group(0)}'): nothing to store")
    if revised := REVISED.search(folded):
        return _no(
            NO_REQUEST,
            f"takes back or corrects its claim ('{revised.group(0).strip(' ,.;:')}'): "
            "say the claim once, as it stands",
        )
    if doubt := audience_doubt(folded):
        return _no(AMBIGUOUS, doubt)
    found = _directive(opening)
    if found is None and _DIRECTIVE_VERB.match(opening):
        return _no(
            AMBIGUOUS,
            "asks to store something but does not state it: say 'remember that <claim>'",
        )
    if found is None:
        return _no(
            NO_REQUEST,
            "no explicit request to remember or record (say 'remember that ...' or "
            "'note that ...')",
        )
    kind, directive, rest = found

    audience = WORKSPACE if _TEAM_IN_DIRECTIVE.search(directive) else SPEAKER
    content = _claim_start(rest)
    prefix = _TEAM_PREFIX.match(content)
    if prefix:
        audience, content = WORKSPACE, content[prefix.end() :]
    elif _PRIVATE_PREFIX.match(content):
        content = _PRIVATE_PREFIX.sub("", content, count=1)
    # Inside a quote as outside it: who it is for, what it points to.
    other = _OTHER_PREFIX.match(opened(content))
    if other:
        return _named_audience(other.group("who"))
    share = _share_request(content)
    if share:
        who = share.group("who").strip()
        if _TEAM_WORDS.match(who):
            audience = WORKSPACE
        elif not _SELF_WORDS.match(who):
            return _named_audience(who)
        content = content[: share.start()]
    named = _at_end(_NAMED_SUFFIX, content)
    if named:
        return _named_audience(named.group("who"))
    suffix = _at_end(_AUDIENCE_SUFFIX, content)
    if suffix:
        if suffix.group("team") or suffix.group("knows"):
            audience = WORKSPACE
        content = content[: suffix.start()]
    content = unquoted(content)

    if not _words(content):
        # "Remember that." ends on its object, a pronoun; in "Remember that 🎉"
        # a claim was to follow and none did, as with "...🎉, remember that".
        leading = opening.startswith(directive)
        if (
            leading
            and not rest[:1].isspace()
            and re.search(r"\b(?:this|that|it)\s*$", directive, _I)
        ):
            return _no(AMBIGUOUS, "unclear what to store: 'that' points outside this turn")
        return _no(EMPTY, "asks to remember but says nothing to store")
    if question_tag(fold(content)):
        return _no(QUESTION, _ASKS)
    if relayed := second_hand(fold(content)):
        return _no(
            HEDGED,
            f"second-hand ('{relayed}'): a claim relayed from someone else is theirs, not "
            "one the speaker states; say it as your own claim to store it",
        )
    if directive.strip(" ,:;").lower().endswith("remember") and _REMINDER.match(opened(content)):
        return _no(
            AMBIGUOUS,
            "a reminder or a recollection ('remember to/when ...'), not a claim to store",
        )
    if _DEICTIC.match(opened(content)):
        return _no(
            AMBIGUOUS,
            "unclear what to store: it points to something outside this turn "
            f"('{_words(content)[0]}')",
        )
    if pronoun := unnamed_person(content):
        return _no(AMBIGUOUS, f"unclear who '{pronoun}' is: name the person in the claim")
    if len(_words(content)) < MIN_CONTENT_WORDS:
        return _no(AMBIGUOUS, "too short to be a claim: say what to remember in a sentence")

    if kind != "decision" and _DECISION_CONTENT.match(content):
        kind = "decision"
    content = capitalised(content)
    if not content.endswith((".", "!")):
        content += "."
    heading = capitalised(title(content))
    body = "" if heading == content.rstrip(".!") else content
    who = "the workspace" if audience == WORKSPACE else "the speaker only"
    return Capture(
        True,
        STORE,
        f"stored: an explicit request to record a {kind}; audience {who}",
        kind=kind,
        title=heading,
        body=body,
        audience=audience,
    )


def check_ids(request_id: str, episode_id: str) -> str:
    """The ids a capture passes on, checked whether or not its turn is stored;
    the episode's id (if any) in canonical form, as the turn's own request id
    is made of it: any spelling of the same episode is the same turn."""
    if fault := request_id_fault(request_id):
        raise errors.InvalidArgument("request_id", fault)
    if not episode_id:
        return ""
    try:
        return str(uuid.UUID(episode_id))
    except ValueError:
        raise errors.InvalidArgument("episode_id", "must be a UUID") from None


def body_with_time(body: str, occurred_at: datetime | None) -> str:
    """A memory is a dated claim: when the turn was said is kept with it (the
    memory's own created_at is when it was captured)."""
    if occurred_at is None:
        return body
    said = f"Said on {occurred_at.astimezone(UTC):%Y-%m-%d at %H:%M} UTC."
    return f"{body}\n\n{said}" if body else said
