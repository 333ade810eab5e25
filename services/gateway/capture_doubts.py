"""What keeps a turn from being a plain statement to store (services/gateway/
capture.py, rules 2 to 5 and the unclear audience of rule 6): questions,
conditionals, hedges, requests not to store, and claims the turn takes back
or corrects. Patterns only; capture.decide applies them in order."""

from __future__ import annotations

import re
import unicodedata

_I = re.IGNORECASE

# Invisible marks inside words (soft hyphen, zero-width spaces and joiners,
# direction marks, variation selectors, the BOM): "may\u00adbe" reads "maybe".
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]"
)
# Question marks of any script: Spanish opening, Greek, Armenian, Arabic,
# Ethiopic, interrobangs, the emoji, the vertical, small and fullwidth forms.
QUESTION_MARK = re.compile(
    "[?\u00bf\u037e\u055e\u061f\u1367\u1945\u203d\u2047-\u2049\u2753\u2754\u2e2e\ufe16\ufe56\uff1f]"
)


def fold(text: str) -> str:
    """The text the doubts are read in: compatibility forms as their plain
    letters (fullwidth, mathematical, ligatures: "\uff4d\uff41\uff59\uff42\uff45"
    is "maybe"), invisible marks gone. The claim stored keeps its own letters."""
    return unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))


QUESTION_WORDS = re.compile(
    r"^(?:what|who|whom|whose|when|where|why|how|which|does|did|can|could|would|should|"
    r"is|are|was|were|will|shall|am|isn't|aren't|doesn't|didn't|won't|wouldn't|shouldn't|"
    r"couldn't|can't)\b",
    _I,
)
# A question tag closing a claim asks the listener to confirm it, question mark
# or not: "..., right", "..., isn't it", "..., do we", "..., is that right".
_TAG = re.compile(
    r"(?:[,\u2014\u2013]|\s-{1,2})\s*(?:right|correct|innit|eh|am i right|"
    r"(?:is|was) (?:that|it) (?:right|correct|so|true)|"
    r"(?:is|are|was|were|do|does|did|have|has|had|can|could|will|should|ai)(?:n't)? "
    r"(?:it|that|this|he|she|they|we|you|i|there))[\s.!]*$",
    _I,
)
# How far from the end a question tag may start: it is short.
_TAG_CHARS = 40


def question_tag(text: str) -> bool:
    """Whether ``text`` ends on a question tag; only its last few characters
    are read, so a turn of any length costs the same."""
    return _TAG.search(text, max(0, len(text) - _TAG_CHARS)) is not None


# "Suppose ...", "assume ..." imagine a case; "I suppose", "we assume" are beliefs (HEDGE).
CONDITIONAL = re.compile(
    r"\b(?:if|what if|(?<!\bi )(?<!\bwe )(?:suppose|assume)|supposing|imagine|imagining|"
    r"hypothetically|in case|assuming|let's say|lets say|say we|were to|would|wouldn't|"
    r"would've|could we|in theory|"
    r"theoretically|unless|in the event|whether|pretend|in a world where|someday|"
    r"provided|providing|as long as|so long as|depending on|on (?:the )?condition|"
    r"contingent (?:on|upon))\b|"
    # "..., pending QA": only opening a clause ("the pending invoices" is a claim)
    r"(?:^|[,;(\u2014\u2013]|\s-{1,2})\s*pending\b",
    _I,
)
# A day, a month or a time of day (not "Mondays": a recurring choice is a claim).
_WHEN = (
    r"(?:(?:next|this|on|in|at|the)\s+)?(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"january|february|march|april|(?-i:May)|june|july|august|september|october|november|"
    r"december|today|tonight|tomorrow|\d{1,2}(?::\d\d)?\s*(?:am|pm)|\d{1,2}:\d\d)"
)
HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|might|mightn't|may be|may have|may not|"
    r"we may|it may|they may|unsure|"
    # a belief, the speaker's alone or shared, is not a stated fact: "we think", "I suppose"
    r"(?:i|we) (?:think|thought|guess|suppose|believe|assume|reckon|suspect|hope|bet|figure|"
    r"gather)|(?:i|we) feel (?:like|that)|(?:my|our) (?:hunch|guess|belief|feeling|impression)|"
    r"uncertain|could be|likely|unlikely|apparently|"
    # "not sure", "not 100% certain", "not entirely positive"
    r"not (?:(?:\d+ ?%|a hundred percent|entirely|completely|totally|quite|fully|that|so|too|"
    r"very|really|super)\s+)?(?:sure|certain|positive|confident)|"
    r"don't quote me|double[- ]?check|(?:need|have) to (?:check|confirm|verify)|"
    r"to be (?:checked|verified|decided)|"
    r"supposedly|allegedly|tentative|tentatively|kind of|sort of|seems|seem to|seemed|"
    r"iirc|if i recall|i'm told|unconfirmed|not confirmed|to be confirmed|tbc|tbd|"
    r"or something|or so|i doubt|hopefully|rumou?r(?:ed)?|"
    r"presumably|guess|"
    # guesses, hopes and opinions: "I'd say", "pretty sure", "I suspect", "IMO"
    r"(?:i|we)'?d (?:say|think|bet)|(?:i'?m|we'?re) (?:guessing|assuming|hoping|thinking|betting)|"
    r"(?:fairly|pretty|quite|almost|reasonably|mostly|nearly|kinda|somewhat) "
    r"(?:sure|certain|confident|positive)|"
    r"imo|imho|in (?:my|our) (?:humble )?(?:opinion|view|book)|fingers crossed|touch wood|"
    r"knock on wood|dunno|idk|prolly|who knows|(?:i have|i've got|i've) no (?:idea|clue)|"
    # second-hand or as far as the speaker knows: "AFAIK", "last I heard"
    r"as far as (?:i|we) (?:know|can tell|understand|remember|recall)|afaik|afaict|iiuc|"
    r"as far as (?:i'?m|i am|we'?re|we are) aware|to (?:the best of )?(?:my|our) knowledge|"
    r"(?:the )?last (?:time )?(?:i|we) (?:heard|checked|looked|saw)|as (?:i|we) understand it|"
    r"or at least (?:it|that|this|they) (?:was|were|used to be)|"
    r"from what (?:i|we) (?:gather|understand|hear|heard|know|can tell|remember)|"
    # not settled yet: "subject to change", "pending confirmation", "needs confirming"
    r"don't hold me to (?:it|that|this)|subject to change|(?:could|may) change|"
    r"not (?:yet )?(?:final|set in stone|official)|"
    # "pending" after a determiner or a number is an adjective: "two pending Acme invoices"
    r"(?<!\bthe )(?<!\ba )(?<!\ban )(?<!\bour )(?<!\bmy )(?<!\byour )(?<!\btheir )(?<!\bits )"
    r"(?<!\bhis )(?<!\bher )(?<!\bany )(?<!\bsome )(?<!\ball )(?<!\bno )(?<!\bthese )"
    r"(?<!\bthose )(?<!\bfew )(?<!\bmany )(?<!\bseveral )(?<!\btwo )(?<!\bthree )(?<!\d )"
    r"pending (?:(?:the|a|an|their|his|her|our|"
    r"your)\s+)?(?:confirmation|approval|review|sign-?off|verification|decision|outcome|"
    r"results?|feedback|tests?|testing|checks?|clearance|agreement|vote|go-ahead|"
    r"(?-i:[A-Z])[\w\-]*)|needs? (?:confirming|confirmation|checking|verifying|"
    r"verification)|"
    # holding only until further word: "for now", "is pending" ("the pending invoices" is a claim)
    r"for (?:now|the time being|the moment)|as (?:things|it) stands?|in principle|"
    r"(?<!there )(?:is|are|was|were|remains?|remained|still)\s+pending|"
    # not settled yet: "not decided yet", "under discussion", "TBA", "we'll see"
    r"(?:not|[a-z]+n't)\s+(?:yet\s+)?(?:been\s+)?(?:decided|settled|agreed|determined|"
    r"finali[sz]ed)|undecided|unsettled|under (?:discussion|consideration|debate|negotiation)|"
    r"up for (?:discussion|debate)|to be (?:announced|determined|arranged|agreed|discussed|"
    r"settled|scheduled|finali[sz]ed|seen)|tba|t\.b\.[acd]|time will tell|"
    r"(?:we'?ll|we will|let's) see(?=\s*(?:[,;.!)\u2014\u2013\u2026]|$|how|what|whether))|"
    # a likelihood or a wish, not a fact: "chances are", "ideally" ("ideally located" is one)
    r"(?:the )?(?:chances|odds) are|in all (?:likelihood|probability)|"
    r"ideally(?!\s+\w+ed\b)|in an ideal world|"
    # tentative or hoped for: "supposed to be", "pencilled in", "all being well"
    r"(?:supposed|expected) to|provisional(?:ly)?|pencil+ed in|all being well|with (?:any|a bit "
    r"of|some) luck|at least (?:that's|that is|that was) the (?:plan|idea|hope)|"
    # vague on purpose: "Friday-ish", "give or take", "or thereabouts"
    r"give or take|or thereabouts|ballpark|more or less|"
    # the best case, or a call still someone's to make: "at best", "Bob's call", "up to Bob"
    r"at (?:best|worst)|(?:is|are|was|were|'s|remains?|stays?)\s+"
    r"(?:(?:entirely|totally|all|really|ultimately|still|solely)\s+)?(?:(?:my|your|his|her|"
    r"their|our)|(?:the\s+)?[\w\-]+(?:'s|s'))\s+(?:call|decision|choice|pick)"
    r"(?=\s*(?:[,;.!)\u2014\u2013]|$|to make))|(?:is|are|was|were|'s|remains?|stays?)\s+"
    r"(?:(?:entirely|totally|all|really|ultimately|still|solely)\s+)?up to\s+(?:me|you|him|"
    r"her|them|us|the (?:team|client|customer|board|committee|manager|lead|owner|boss)|"
    r"(?-i:[A-Z][a-z])[\w\-]*))\b|(?<=\w)-ish\b|"
    # two days, months or times for one value: "on Friday or Saturday", "at 3pm or 4pm"
    rf"\b{_WHEN}\s*,?\s+or\s+{_WHEN}\b|"
    # said at a clause's start, these doubt the claim before them ("..., no idea.",
    # "..., I was told."); inside a claim they may be what it says ("Bob has no idea")
    r"(?:[,;(\u2014\u2013\u2026]|\s-{1,2})\s*(?:no idea|no clue|not a clue|i was told|"
    r"i (?:don't|do not) know|"
    r"i heard|i hear|i expect|i understand|i'm told|so i'm told)\b|"
    # a thinking face, crossed fingers, a shrug
    r"[\U0001f914\U0001f91e\U0001f937]|\\_\(\u30c4\)_/",
    _I,
)
# Asking not to store: anywhere in the turn ("..., but don't note that").
NEGATED = re.compile(
    r"\b(?:don'?t|do not|never|no need to|you don'?t need to|stop)\s+(?:\w+\s+)?"
    r"(?:remember|record|note|save|store|log|keep|write)"
    r"(?:\s+down)?(?:\s+(?:that|this|it|anything|any of)\b|\s*[:.,!;]|\s*$)|"
    r"^(?:never ?mind|forget (?:that|this|it|about)|scratch that|ignore (?:that|this))\b",
    _I,
)

# A claim the turn itself takes back, wherever it comes ("..., scratch that",
# "... Wait, no, 6000."): what is left to store is unclear.
WITHDRAWN = re.compile(
    r"\b(?:never ?mind|scratch that|(?<!don't )(?<!do not )forget (?:that|this|it|what i said)|"
    r"ignore (?:that|this|what i said)|disregard (?:that|this|it)|just (?:kidding|joking)|"
    r"wait,? no|no,? wait|actually,? no)\b",
    _I,
)
# A later clause that takes the claim back, corrects it or doubts it ("...
# No, Monday.", "..., I mean Monday", "... Or not.", "... Cancel that.",
# "... jk"): which version holds is not plainly said. A clause begins after a
# mark or a dash, never at the turn's start, and may open with up to three
# interjections ("Oops, wrong chat", "Actually don't"); bounded, so each mark
# costs a fixed amount however long the turn.
_INTERJECTION = (
    r"(?:oh|oops|sorry|hmm+|ha(?:ha)*|lol|ok(?:ay)?|well|wait|hold on|actually|"
    r"on second thought|so)"
)
_CLAUSE = r"(?:[.!;(\u2014\u2013\u2026]|\s-{1,2})"
REVISED = re.compile(
    rf"(?:{_CLAUSE}|[,:])\s*(?:{_INTERJECTION}\b[\s,.!]*){{0,3}}"
    r"(?:"
    # a clause that takes back: "Cancel that", "Disregard.", "Forget I said that"
    r"(?:cancel|strike|scratch|undo|delete|disregard|ignore|forget|withdraw|retract)\b|"
    # a bare refusal or denial: "Don't.", "No, Monday", "Not!", "Nope"
    r"(?:don't|do not|no|nope|nah|not)\s*(?:[,.!;:)\u2014\u2013]|$)|"
    r"not (?:really|true|anymore)\b|"
    # a correction: "I mean", "Correction:", "Actually it's", "er, Monday"
    r"(?:i mean|i meant|correction|or rather|rather|or not|actually|er+m?|um+|uh+)\b|"
    # owning up: "I was wrong", "My mistake", "wrong chat", "jk"
    r"(?:i was wrong|that's wrong|that was wrong|my (?:mistake|bad)|wrong (?:chat|thread|"
    r"window|conversation|person)|jk|j/k|kidding|joking)\b|"
    # an update or fix: "Edit: Monday", "Sorry, Monday", "Oh wait, Monday", "Make that ..."
    r"(?:edit(?:ed)?|update[ds]?|upd|typo|wrong|sorry|wait|hold on|hang on)"
    r"\s*(?:[,:;!.)\u2014\u2013]|-\s|$)|"
    r"(?:make (?:that|it)|changed (?:it )?to|now it's|it's now|let me rephrase|rephrasing|"
    r"instead(?! of))\b|"
    # a starred correction ("... *Monday")
    r"\*[^\W_]"
    r")|"
    # a substitution: "s/Friday/Monday/"
    r"(?<![\w/])s/[^/\s]+/|"
    # a second version: "... Or Monday.", "..., hmm, or Monday" (a list's ", or" is not)
    rf"(?:{_CLAUSE}\s*(?:{_INTERJECTION}\b[\s,.!]*){{0,3}}|"
    rf"[,:]\s*(?:{_INTERJECTION}\b[\s,.!]*){{1,3}})or\b|"
    # a claim turned into a question: "Friday or was it Monday", ", or does he"
    r"\bor (?:is|was|are|were|do|does|did|will|would|can|could|has|have|had) "
    r"(?:it|he|she|they|we|i|you|that|this|there)\b",
    _I,
)
# A team audience the turn negates or narrows ("not for everyone", "for the
# team except Bob"): who may see it is unclear, so nothing is stored.
_TEAM_NAMED = (
    r"(?:(?:for|with|to)\s+)?(?:the (?:whole )?team|everyone|everybody|all of us|the workspace)"
    r"|team-wide|workspace-wide"
)
UNCLEAR_AUDIENCE = re.compile(
    rf"(?:\bnot|\bnever|n't)\s+(?:\w+\s+)??(?:{_TEAM_NAMED})\b|"
    rf"\b(?:{_TEAM_NAMED}|for all)\s*,?\s*"
    r"(?:except|but|besides|minus|other than|excluding|apart from|save for)\b",
    _I,
)

# A turn copied or addressed to other people beside the speaker ("..., cc Bob",
# "bcc: Ana", "loop in Bob", "keep Bob in the loop", "@bob"): an audience the
# speaker did not state for the memory, as "for Bob" is. Someone addressed is
# a capitalised name, an @handle or the team; "cc" with anything after it
# counts at a clause's start or before a colon ("250 cc", "the cc list" do not).
_ONE = (
    r"(?:@[A-Za-z][\w\-]*|[A-Z](?:[a-z]|'[A-Z])[\w'\-]*|"
    r"(?i:the (?:whole )?team|everyone|everybody|all of us))"
)
_SOME = rf"{_ONE}(?:(?:\s*,\s*|\s+(?i:and)\s+|\s+){_ONE}){{0,4}}"
_CC = r"(?i:b?cc(?:'?(?:ing|ed|d|s))?)"
_AT_CLAUSE = r"(?:^|[,;:.!(\u2014\u2013]|\s-{1,2}|\s(?i:and|please))\s*"
ADDRESSED = re.compile(
    rf"(?<![\w.@])@[A-Za-z][\w\-]*(?:\.[\w\-]+)*|"
    rf"{_AT_CLAUSE}{_CC}\s*:?\s+[\w@][\w'\-]*(?:(?:\s*,\s*|\s+(?i:and)\s+){_ONE}){{0,4}}|"
    rf"\b{_CC}(?:\s*:\s*|\s+){_SOME}|"
    rf"{_AT_CLAUSE}(?i:loop\s+in)\s+{_SOME}|\b(?i:loop(?:ing|ed)\s+in)\s+{_SOME}|"
    rf"\b(?i:loop(?:s|ing|ed)?)\s+{_SOME}\s+(?i:in)\b|"
    rf"\b(?i:keep(?:s|ing)?|kept)\s+{_SOME}\s+(?i:in the loop|posted)\b"
)


def audience_doubt(flat: str) -> str | None:
    """Why who may see the turn's memory is unclear, if it is."""
    if unclear := UNCLEAR_AUDIENCE.search(flat):
        return f"unclear who may see it ('{unclear.group(0)}'): say 'just for me' or 'for the team'"
    if addressed := ADDRESSED.search(flat):
        who = addressed.group(0).strip(" ,;:.!(-\u2014\u2013")
        return (
            f"addressed to others beside the speaker ('{who}'): say 'just for me' or "
            "'for the team', or use remember with that member's id"
        )
    return None
