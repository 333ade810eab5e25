"""Claims relayed from someone else (services/gateway/capture.py, rule 4):
what another person said, thinks or holds as their view is their word, not
evidence the speaker states. Patterns only; capture.decide applies them."""

from __future__ import annotations

import re

_I = re.IGNORECASE

# A claim relayed from someone else ("Alice said ...", "..., says Bob",
# "according to Bob, ...", "as Bob put it"): their word, not one the speaker states. Verbs of
# saying in any tense; those that often take a thing as object ("Ana wrote the
# parser", "Ops confirmed the test") count only before "that", ":", a quote or
# a clause of its own ("Bob confirmed the deploy is ..."), and those that need a
# hearer ("told the client") only after one.
_SAYING = (
    r"say|says|said|saying|claim(?:s|ed|ing)?|mention(?:s|ed|ing)?|insist(?:s|ed|ing)?|"
    r"swear(?:s|ing)?|swore|sworn|reckon(?:s|ed)?|thinks?|thought|believe[sd]?"
)
# Verbs of holding a view, whose object is the view ("Bob suspects the deploy
# is ...", "Bob expects the deploy on Friday"): their guess, not a fact stated.
_HOLDING = (
    r"suspect(?:s|ed)?|doubt(?:s|ed)?|predict(?:s|ed)?|estimat(?:e|es|ed)|"
    # awaiting a birth is no view: "Bob expects a baby in May"
    r"expect(?:s|ed)?(?!\s+(?:(?:a|an|another|their|his|her|our|my|your)\s+)?(?:(?:first|"
    r"second|third|new)\s+)?(?:bab(?:y|ies)|child(?:ren)?|kids?|twins|triplets|grandchild|son|"
    r"daughter|boy|girl)\b)|"
    r"fear(?:s|ed)?|hop(?:e|es|ed)|guess(?:es)?|suppos(?:e|es|ed)|contend(?:s|ed)?|"
    r"figur(?:e|es|ed)"
)
# Those that often take a thing ("feels the cold", "suggested a fix") hold a
# view only before a clause of their own, as the verbs of confirming do.
_HOLDING_THAT = (
    r"(?:feel(?:s|ing)?|felt)(?:\s+(?:strongly|firmly))?|argu(?:e|es|ed|ing)|suggest(?:s|ed|ing)?|maintain(?:s|ed)?|"
    r"assum(?:e|es|ed)|imagin(?:e|es|ed)|gather(?:s|ed)?|understand(?:s)?|understood|"
    r"recall(?:s|ed)?|agree(?:s|d)?|"
    # a guess made is often what happened: "Bob guessed the password"
    r"guessed"
)
# Another person's wish or plan ("Bob wants the deploy on Friday", "Bob plans to
# ship"): theirs, not a settled fact; a want of their own things, or of a thing
# to have, is a preference stated ("Ada wants her reports on Monday", "the client
# wants his invoices", "Bob wants a window seat", as "Bob wants tea").
# "Plan" and "want" are nouns after a determiner ("the plan to migrate is ...").
_WISHING = r"want(?:s|ed)?|plan(?:s|ned)?|intend(?:s|ed)?"
_WISHED = (
    r"(?<!\bthe )(?<!\ba )(?<!\ban )(?<!\bour )(?<!\bmy )(?<!\byour )(?<!\btheir )"
    r"(?<!\bthis )(?<!\bthat )(?:(?:plan(?:s|ned)?|intend(?:s|ed)?)\s+to\s+\w|want(?:s|ed)?"
    r"(?!\s+(?:his|her|their|its)\s+(?!to\b)\w)\s+(?:to\s+\w|(?:the|this|that|these|"
    r"those|us|them|me|you|him|her|everyone|everybody|it|we|our|my|your)\b|\d|(?-i:[A-Z])))"
)
# Being sure of a claim is holding it: "Bob is convinced we ship ...".
_SURE = (
    r"(?:is|was|are|were|seems|seemed|has been|had been)\s+(?:(?:so|very|quite|absolutely|"
    r"totally|fully|completely)\s+)?(?:convinced|sure|certain|confident|adamant|positive|"
    r"of the (?:view|opinion|belief|mind))"
)
_CALENDAR = (
    r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|jan(?:uary)?|feb(?:ruary)?|march|april|may|"
    r"june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
# Someone's view named as such: "Bob's take is ...", "Bob's view: ...", "in
# Bob's view", "(Bob's words)"; "Bob's view of the harbour" is a thing.
_VIEW = (
    r"(?:(?:own|personal|honest|strong|gut|best|initial|latest|current|considered|rough)\s+)?"
    r"(?:take|view|opinion|position|stance|understanding|sense|belief|feeling|impression|"
    r"hunch|guess|estimate|assessment|read|verdict|thinking|expectation|prediction|bet|"
    r"theory|recollection|suspicion|words|plan|intention|proposal|idea|wish|goal|aim)s?"
)
# Hearing relays a claim only with a clause or a source ("heard the deploy is ...",
# "heard from Bob"): "we heard the alarm" is what the hearer perceived.
_HEARING = r"hear(?:s|d|ing)?"
_TELLING = (
    r"tell|tells|told|telling|inform(?:s|ed|ing)?|assur(?:e|es|ed|ing)|warn(?:s|ed|ing)?|"
    r"promis(?:e|es|ed|ing)|let"
)
_SAYING_THAT = (
    r"confirm(?:s|ed|ing)?|report(?:s|ed|ing)?|announc(?:e|es|ed|ing)|explain(?:s|ed|ing)?|"
    r"admit(?:s|ted|ting)?|state[sd]|stating|wr(?:ite|ites|ote|itten)|posted|e-?mailed|"
    r"texted|messaged|pinged|slacked"
)
_VERB = rf"(?:{_SAYING}|{_TELLING}|{_SAYING_THAT}|{_HEARING})"
# Words between a subject and its verb ("Alice has just said", "Bob did say"):
# a few at most, so a long run of them costs each position a bounded amount.
_AUX = (
    r"(?:(?:has|have|had|did|does|do|will|would|just|also|always|already|once|again|even|"
    r"clearly|explicitly|specifically|repeatedly)\s+){0,3}"
)
# Whom a claim was told to ("told me", "told the client", "let us know") or
# heard from ("said to Bob", "heard from Bob").
_HEARER = (
    r"(?:me|us|him|her|them|you|everyone|everybody|all of us|"
    r"(?:the|our|my|his|her|their)\s+[\w'\-]+|(?-i:[A-Z])[\w'\-]*)"
)
_QUOTES = "\"'\u201c\u2018\u00ab\u201e"
# What opens a reported clause: "that", a quote, a subject.
_CLAUSE_START = (
    rf"(?:that\b|[{_QUOTES}]|\d|(?-i:[A-Z])|"
    r"(?:the|a|an|we|i|you|he|she|it|they|there|this|these|those|our|my|your|his|her|"
    r"their|its|everyone|everybody|nobody|someone|somebody|all|every|each|some|most|"
    r"both|none)\b)"
)
# A clause of its own after a verb, without "that": a subject pronoun and a
# word ("confirmed we ship"), or up to four words and a finite verb ("confirmed
# the deploy is ...", "admitted the backup failed."); a thing as its object
# ("confirmed the booking", "wrote the parser used by billing") is none.
_NOT_SUBJECT = (
    r"(?:and|or|but|which|who|whom|whose|because|since|so|when|while|where|if|then|from|"
    r"in|on|at|for|with|by|to|about|into|after|before|until|over)\b"
)
_FINITE = (
    r"(?:is|are|was|were|will|would|has|have|had|can|could|must|should|shall|may|might|"
    r"does|did|do|cannot|(?:is|are|was|were|wo|would|has|have|had|ca|could|should|does|did|"
    r"do)n't|[a-z]{2,}ed(?=\s*(?:[,;.!]|$)|\s+(?:to|at|on|in|into|from|for|after|before|"
    r"during|over|yesterday|today|tonight|again|back|out|up|down|off|once|twice|last)\b))\b"
)
_BARE_CLAUSE = (
    rf"\s+(?:(?:i|we|you|he|she|they)\s+\w|(?:(?!{_NOT_SUBJECT})[\w'\-]+\s+){{1,4}}{_FINITE})"
)
# After a verb of saying, a clause opened as above or by "to" and a verb;
# after a comma or a colon, one with no article too ("Bob said, deploy is ...").
_REPORTED_CLAUSE = rf"(?:(?:\s*[,:]\s*|\s+)(?:{_CLAUSE_START}|to\s+\w)|\s*[,:]{_BARE_CLAUSE})"
# A verb that may take a thing ("wrote", "emailed") relays a clause set off by
# a bare comma ("Bob wrote, the deploy is Friday", "Bob texted me, ..."); a
# list of who did what ("Ana wrote, Bob reviewed ...") or of deeds ("wrote,
# tested and shipped") is none, and a hearer is a pronoun: in "wrote the
# report, the ..." the report is what was written.
_COMMA_CLAUSE = (
    r"(?:\s+(?:me|us|him|her|them|you|everyone|everybody|all of us))?\s*,"
    rf"(?!\s*(?:i|we|you|he|she|they|(?-i:[A-Z])[\w'\-]*)\s+[a-z]+ed\b)"
    rf"(?:\s*{_CLAUSE_START}|{_BARE_CLAUSE})"
)
# A phrase put between a verb and what was said relays it as the plain form
# does: a few words set apart by commas, dashes or brackets ("wrote, in Slack,
# that", "mentioned \u2014 in passing \u2014 that", "wrote (in Slack) that"), or
# a plain when or where ("said on the call that", "confirmed by email last week that").
# Set apart, it may stand between the subject and its verb too ("Bob, in Slack,
# wrote that", "Bob, our lead, said ...").
_ASIDE_WORDS = r"[^\W_][\w'\-]*(?:\s+[\w'\-]+){0,5}"
_SET_APART = (
    rf"(?:\s*,\s*{_ASIDE_WORDS}\s*,|\s*[\u2014\u2013]\s*{_ASIDE_WORDS}\s*[\u2014\u2013]|"
    rf"\s+-{{1,2}}\s+{_ASIDE_WORDS}\s+-{{1,2}}|\s*\(\s*{_ASIDE_WORDS}\s*\))"
)
_WHEN_WHERE = (
    r"(?:earlier|before|yesterday|today|tonight|again|once|twice|recently|later|"
    r"(?:this|last)\s+\w+|(?:in|on|at|during|after|over|by|via|through)\s+"
    r"(?:(?:the|our|a|an|this|that|last|his|her|their|my|your)\s+)?[\w'\-]+)"
)
_ASIDE = rf"(?:{_SET_APART}|(?:\s+{_WHEN_WHERE}){{1,2}})?"
# Verbs of telling that may leave out whom they tell ("Bob warned the deploy is ...").
_PROMISING = r"warn(?:s|ed|ing)?|promis(?:e|es|ed|ing)|assur(?:e|es|ed|ing)"
_NAME = r"(?<![\w'\-])[^\W_][\w'\-]*"
_CLAUSE_MARK = r"(?:[,;:.!(\u2026\u2014\u2013\"'\u201d\u2019\u00bb]|\s-{1,2})\s*"
_MARK = rf"(?:^|{_CLAUSE_MARK})"
_CLOSE = r"\s*(?:[,;:.!)\u2026\u2014\u2013\"'\u201d\u2019\u00bb]|$)"
_WHO = r"(?:(?:the|our|my|his|her|their)\s+)?(?:[\w'\-]+\s+)?"
# A possessive is no one's name: in "wants her reports on Monday" "reports" is a noun.
_NOT_POSSESSIVE = r"(?!(?:her|his|their|its|my|our|your)\b)"
# What may follow a verb of saying that ends its clause: "Bob said so", "as
# Ana said at standup", "Alice told me yesterday".
_SAID_WHEN = (
    r"(?:\s+(?:so|too|also|me|us|him|her|them|it|this|that|earlier|before|yesterday|today|"
    r"again|once|then|to (?:me|us|everyone|the team)|(?:this|last) \w+|"
    r"(?:at|in|on|during|after|over|by)\s+(?:(?:the|our|a|this|last)\s+)?[\w'\-]+)){0,3}"
)
REPORTED = re.compile(
    # "Alice said the ...", "Bob told me that ...", "Bob let us know ...", "Ana wrote: ..."
    rf"(?P<subject>{_NAME}){_SET_APART}?\s+{_AUX}(?P<verb>"
    rf"(?:{_SAYING}|{_HOLDING})(?:\s+(?:to|from)\s+{_HEARER})?{_ASIDE}{_REPORTED_CLAUSE}|"
    rf"(?:{_TELLING})\s+{_HEARER}(?:\s+know)?{_ASIDE}{_REPORTED_CLAUSE}|"
    rf"(?:{_SAYING_THAT}|{_PROMISING}|{_HOLDING_THAT})(?:(?:\s+(?:to\s+)?{_HEARER})?{_ASIDE}"
    rf"(?:\s+that\b|\s*:|\s*[{_QUOTES}]|{_BARE_CLAUSE})|{_COMMA_CLAUSE})|"
    rf"(?:{_HEARING}){_ASIDE}(?:\s+(?:from|about)\b|\s+that\b|\s*:|\s*[{_QUOTES}]|"
    rf"{_BARE_CLAUSE})|{_SURE}{_ASIDE}(?:\s+that\b|\s*:|{_BARE_CLAUSE})|{_WISHED})|"
    # "..., Alice said.", "... Bob said so.", "As Bob said at standup, ..."
    rf"(?:^\s*as\s+|{_CLAUSE_MARK}(?:and\s+|as\s+)?)(?:[\w'\-]+\s+(?:and|&)\s+)?{_WHO}{_NOT_POSSESSIVE}(?P<teller>{_NAME})\s+{_AUX}"
    rf"(?P<after>{_VERB}|{_HOLDING}|{_HOLDING_THAT}){_SAID_WHEN}{_CLOSE}|"
    # "..., says Bob.", "\u201c...,\u201d said Alice."
    rf"{_MARK}(?P<before>{_VERB})\s+{_WHO}(?P<speaker>{_NAME}){_CLOSE}|"
    # "according to Bob", "per Bob", "we were told", "reportedly", "word is"
    rf"\baccording to\s+{_WHO}(?P<source>{_NAME})|"
    # "per Bob" anywhere, "per the client" (not "per person", "per API call")
    rf"\bper\s+(?:(?P<per>(?-i:[A-Z][a-z])[\w'\-]*)|(?:the|our|my|his|her|their)\s+"
    rf"(?:[\w'\-]+\s+)?(?P<perthe>{_NAME}))|"
    # "..., via Bob.", "..., h/t Ana" set apart at the end of a clause
    rf"{_CLAUSE_MARK}(?:via|h/t|hat tip to|source\s*:)\s+{_WHO}(?P<via>{_NAME}){_CLOSE}|"
    # "..., from Bob." (a capitalised name: "..., from Monday" says when)
    rf"{_CLAUSE_MARK}from\s+(?P<sender>(?!{_CALENDAR}\b)(?-i:[A-Z][a-z])[\w'\-]*){_CLOSE}|"
    rf"(?:\bin\s+{_WHO}(?P<inview>[^\W_][\w\-]*)'s\s+{_VIEW}\b|"
    rf"{_WHO}(?P<holder>(?<![\w'\-])[^\W_][\w\-]*)'s\s+{_VIEW}"
    r"(?:\s+(?:is|was|are|were|remains|being)\b|\s*[:)\u2014\u2013]|\s+-\s)|"
    rf"{_WHO}(?P<quoted>(?<![\w'\-])[^\W_][\w\-]*)'s\s+words(?:\s*,|\s+not\b))|"
    rf"\bas\s+{_WHO}(?P<putter>{_NAME})\s+put it\b|"
    r"\b(?:was|were|been|being|gets?|got|getting)\s+told\b|\b(?:reportedly|hearsay|"
    r"rumou?r has it|word (?:is|has it)|in [\w'\-]+'s words|to quote|in the words of|unquote)\b|"
    # "..., quoting Bob", "quoting Bob, ...", "Bob wrote, quote, ..." ("quoting 10k" is a price)
    rf"(?:^|{_CLAUSE_MARK})quoting\s|\bquoting\s+(?-i:[A-Z])|(?:^|{_CLAUSE_MARK})quote{_CLOSE}",
    _I,
)
# A word REPORTED starts from or turns on: a turn with none (most) is passed
# over in one quick scan, not tried at every position.
_REPORTING_WORD = re.compile(
    rf"\b(?:{_VERB}|{_HOLDING}|{_HOLDING_THAT}|{_WISHING}|according|per|put|reportedly|"
    rf"hearsay|rumou?r|word|quote|quoting|unquote|via|h/t|hat|source|from|{_VIEW}|convinced|sure|certain|confident|adamant|"
    r"positive)\b",
    _I,
)
# Who may relay a claim as their own: the speaker; and a written source ("the
# contract says ...") or an instrument is evidence anyone can read again.
_OWN = frozenset({"i", "we", "it", "this", "that", "which"})
_WRITTEN = re.compile(
    r"(?:sign|label|contract|agreement|polic(?:y|ie)|spec|specification|wiki|doc|"
    r"documentation|readme|manual|handbook|guide|faq|changelog|law|rule|regulation|term|"
    r"licen[cs]e|schedule|calendar|plan|ticket|invoice|receipt|minute|notice|memo|log|error|"
    r"screen|banner|page|website|site|config|menu|map|box|package|form|dashboard|chart|table|"
    r"timetable|agenda|sheet|spreadsheet|record|code|output|note|app|tool|system|cli|ui|"
    r"display|printer|meter|monitor|alert|prompt|console|terminal|build|test|check|linter|"
    r"compiler|"
    # an instrument's reading, which anyone can take again: "the thermometer says 20 degrees"
    r"\w*met(?:er|re)|gauge|scale|sensor|clock|watch|timer|thermostat|compass|gps|satnav|"
    r"counter|readout|reading|probe|indicator|detector|tracker)s?"
)


def _relayer(found: re.Match[str]) -> str | None:
    """Who a reported claim comes from, in lower case; None when no one is
    named by the words ("reportedly", "we were told")."""
    for group in (
        *("subject", "teller", "speaker", "source", "putter", "per", "perthe", "via"),
        *("inview", "holder", "sender", "quoted"),
    ):
        if who := found.group(group):
            return who.lower().split("'")[0]
    return None


# A subject and a phrase set apart after it, at a sentence's start: the verb
# after them is theirs ("Ada, our lead, confirmed the booking"), not one put
# after a claim ("..., confirmed the client"). How far back it is looked for.
_SUBJECT_ASIDE = re.compile(rf"(?:^|[.;:!]\s+|\s(?:and|but)\s+){_WHO}{_NAME}{_SET_APART}\s*$", _I)
_SUBJECT_ASIDE_CHARS = 200


def _after_its_subject(claim: str, verb_at: int) -> bool:
    """Whether the verb at ``verb_at`` follows its own subject and an aside."""
    start = max(0, verb_at - _SUBJECT_ASIDE_CHARS)
    # A cut start is no sentence's start: the NUL keeps '^' from reading it as one.
    head = claim[start:verb_at] if start == 0 else "\0" + claim[start:verb_at]
    return _SUBJECT_ASIDE.search(head) is not None


def second_hand(claim: str) -> str | None:
    """The words that relay ``claim`` from someone else, if any: a verb of
    saying or hearing whose subject is not the speaker ("I told Bob ..." is the
    speaker's own word, "we heard ..." is not) nor a written source."""
    if not _REPORTING_WORD.search(claim):
        return None
    pos = 0
    while found := REPORTED.search(claim, pos):
        who = _relayer(found)
        verb = found.group("verb") or found.group("after") or found.group("before") or ""
        heard = verb.lower().startswith("hear")
        if found.group("before") and _after_its_subject(claim, found.start("before")):
            pos = found.start() + 1
            continue
        if who is None or not (_WRITTEN.fullmatch(who) or (who in _OWN and not heard)):
            return found.group(0).strip(" ,;:.!(-\u2014\u2013\u2026\"'\u201d\u2019\u00bb")
        pos = found.start() + 1
    return None
