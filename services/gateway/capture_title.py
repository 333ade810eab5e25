"""A captured claim's quotes, and its title (services/gateway/capture.py).

A pair of quotes or brackets around the whole claim is not part of it
("Remember that "we ship Friday"." stores we ship Friday); a pair inside it
is what was said ('"We ship Friday," read the banner') and is kept whole; a mark
with no partner at either end is dropped. The title is the first sentence,
never ended inside a quote nor at an abbreviation ("Dr.", "e.g."), and a
title cut inside a quote closes it: its quotes come in pairs. A name's initial
("J. Smith") does not end a sentence either."""

from __future__ import annotations

import re
from collections.abc import Iterator

MAX_TITLE_CHARS = 80

# Each opening mark and the marks that close it (German „...“ and „...”).
_CLOSERS = {
    '"': '"',
    "'": "'",
    "\u201c": "\u201d",
    "\u201e": "\u201c\u201d",
    "\u00ab": "\u00bb",
    "\u2039": "\u203a",
    "\u300c": "\u300d",
    "\u300e": "\u300f",
}
QUOTE_MARKS = frozenset(_CLOSERS) | frozenset("".join(_CLOSERS.values()))
_QUOTE = re.compile("[" + re.escape("".join(sorted(QUOTE_MARKS))) + "]")
# Before the claim or after it, never part of it.
_EDGES = " \t,:;-"
# What may follow a closing quote that ends the claim.
_STOPS = ".!\u2026"
_SENTENCE_END = re.compile(r"(?<=[.!;])\s+")
# A stop that ends an abbreviation, not a sentence: a title ("Dr."), a short
# form ("vs.", "approx."), or letters with stops between ("e.g.", "a.m.",
# "U.S."). All are short: the few characters before a stop tell.
_ABBREVIATION = re.compile(
    r"(?:^|[\s(\"'])(?:(?i:dr|mr|mrs|ms|mx|prof|st|mt|jr|sr|vs|approx|cf|ca|fig|dept|est|"
    r"inc|ltd|corp|co|llc|plc|bros|gen|col|lt|sgt|capt|gov|sen|rev|hon|ave|rd|blvd|"
    r"jan|feb|apr|jun|jul|aug|sep|sept|oct|nov|dec|mon|tue|tues|thu|thur|thurs|fri)|"
    r"[^\W\d_](?:\.[^\W\d_])+)\.$"
)
# Short forms that are words too ("no", "sat"), or one letter ("p."), are one
# only before a number: "invoice no. 42", "p. 12", "Mar. 5" ("The answer was no."
# ends a sentence).
_NUMBERED = re.compile(
    r"(?:^|[\s(\"'])(?i:no|nos|p|pp|vol|ch|sec|art|para|eq|op|ed|mar|sat|sun|wed)\.$"
)
# A capital letter alone before a stop is a name's initial ("J. Smith", "A. B.
# Jones") unless the next word opens a sentence ("plan A. It is cheaper.").
_INITIAL = re.compile(r"(?:^|[\s(\"'])(?-i:[A-Z])\.$")
_OPENS_SENTENCE = re.compile(
    r"(?:the|it|its|we|i|he|she|they|you|this|that|these|those|there|then|but|and|so|also|"
    r"our|my|his|her|their|your|a|an|in|on|at|for|if|when|please|now|next|see|after|before|"
    r"however|still|both|all|no|yes|nobody|everyone)\b(?!\.)",
    re.IGNORECASE,
)
_ABBREVIATION_CHARS = 12
# How deep a quote may sit inside others and still be closed; how many
# layers of quotes around a claim are taken off.
NESTED = 8
LAYERS = 4
# An apostrophe for left-out letters or a century ("'tis", "'90s"): with no
# partner at the claim's start it is part of its first word, not a quote.
_ELIDED = re.compile(
    r"'(?:\d\d(?:s\b|(?!\w))|(?i:tis|twas|twere|twill|twould|em|cause|cos|til|bout|nuff)\b)"
)


def _apostrophe(text: str, at: int) -> bool:
    # Between letters ("don't", "Bob's"), a single quote is part of a word.
    return (
        text[at] == "'"
        and 0 < at < len(text) - 1
        and text[at - 1].isalnum()
        and text[at + 1].isalnum()
    )


def _can_open(text: str, at: int) -> bool:
    mark = text[at]
    after = text[at + 1 : at + 2]
    if mark not in _CLOSERS or not after or after.isspace() or after in ",;:!?)]}.":
        return False
    # An apostrophe inside or after a word ("Bob's", "students'") opens nothing.
    return mark != "'" or at == 0 or not text[at - 1].isalnum()


def pairs(text: str) -> tuple[dict[int, int], set[int]]:
    """The quotes of ``text``: each opening mark's index to its closing one's,
    and the marks that have no partner (an inch mark, a stray quote).
    Apostrophes between letters are not quotes. A closing mark looks for its
    opening one among the last NESTED still open: linear in the text."""
    matched: dict[int, int] = {}
    unmatched: set[int] = set()
    open_at: list[int] = []
    for found in _QUOTE.finditer(text):
        at, mark = found.start(), found.group(0)
        if _apostrophe(text, at):
            continue
        before = text[at - 1 : at]
        closes = [i for i in open_at[-NESTED:] if mark in _CLOSERS[text[i]]]
        if (
            closes
            and before
            and not before.isspace()
            and (closes[-1] == open_at[-1] or not _can_open(text, at))
        ):
            opener = closes[-1]
            while open_at[-1] != opener:
                unmatched.add(open_at.pop())
            matched[open_at.pop()] = at
        elif _can_open(text, at):
            open_at.append(at)
        else:
            unmatched.add(at)
    unmatched.update(open_at)
    return matched, unmatched


_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def _bracket_closing(text: str) -> int | None:
    """Where the bracket opening ``text`` is closed, brackets inside it
    nesting; None when it opens none or is never closed. One pass."""
    closer = _BRACKETS.get(text[:1])
    if closer is None:
        return None
    depth = 0
    for at, char in enumerate(text):
        if char == text[0]:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return at
    return None


def unquoted(text: str) -> str:
    """``text`` without the spaces and marks around it, a pair of quotes
    around all of it, or a quote at either end with no partner; the quotes
    inside it, paired or not ("12" pizza"), and an elision's apostrophe
    opening it ("'tis"), are its own. Brackets around all of it go as a
    pair of quotes does. A few layers at
    most, each a pass over the text."""
    for _ in range(LAYERS):
        text = text.strip(_EDGES)
        if not text:
            break
        # A space before the closing stops is not the claim's ("Friday" .).
        before_stops = text.rstrip(_STOPS)
        text = before_stops.rstrip() + text[len(before_stops) :]
        matched, unmatched = pairs(text)
        last = len(text.rstrip(_STOPS)) - 1
        closing = _bracket_closing(text)
        if 0 in matched and not text[matched[0] + 1 :].strip(_STOPS):
            text = text[1 : matched[0]] + text[matched[0] + 1 :]
        elif closing is not None and not text[closing + 1 :].strip(_STOPS):
            # Brackets around the whole claim are dropped as quotes are.
            text = text[1:closing] + text[closing + 1 :]
        elif 0 in unmatched and not _ELIDED.match(text):
            text = text[1:]
        elif last in unmatched:
            text = text[:last] + text[last + 1 :]
        else:
            break
    return text.strip(_EDGES)


def opened(text: str) -> str:
    """``text`` past the opening quotes it starts with."""
    return text.lstrip("".join(_CLOSERS))


def capitalised(text: str) -> str:
    """The claim with its first word capitalised when that is a plain
    lowercase word: "iPhone", "eBay", a URL are written as given; an opening
    quote is passed over ('"we ship" ...' -> '"We ship" ...')."""
    start = len(text) - len(opened(text))
    word = text[start:].split(" ", 1)[0].rstrip(",;:.!").replace("'", "")
    word = "".join(c for c in word if c not in QUOTE_MARKS)
    if not (word.isalpha() and word.islower()):
        return text
    return text[:start] + text[start].upper() + text[start + 1 :]


def _outside_quotes(text: str, ends: Iterator[re.Match[str]], matched: dict[int, int]) -> int:
    """Where the first of ``ends`` not between a pair's marks starts; the
    text's length when there is none. Pairs nest, so the outermost ones,
    in order, are all a position need be checked against."""
    outermost: list[tuple[int, int]] = []
    for opener, closer in sorted(matched.items()):
        if not outermost or opener > outermost[-1][1]:
            outermost.append((opener, closer))
    pair = 0
    for end in ends:
        at = end.start()
        while pair < len(outermost) and outermost[pair][1] <= at:
            pair += 1
        if pair == len(outermost) or not outermost[pair][0] < at:
            return at
    return len(text)


def _sentence_ends(content: str) -> Iterator[re.Match[str]]:
    """Where a sentence of ``content`` may end: past a stop not ending an
    abbreviation, a short form before its number or a name's initial."""
    for end in _SENTENCE_END.finditer(content):
        before = content[max(0, end.start() - _ABBREVIATION_CHARS) : end.start()]
        after = content[end.end() : end.end() + _ABBREVIATION_CHARS]
        if _ABBREVIATION.search(before) or (after[:1].isdigit() and _NUMBERED.search(before)):
            continue
        if _INITIAL.search(before) and not _OPENS_SENTENCE.match(after):
            continue
        yield end


def title(content: str) -> str:
    """The claim's first sentence (a sentence ends outside quotes, not at an
    abbreviation's stop), at most MAX_TITLE_CHARS long, cut at a word and
    closing any quote it cuts."""
    matched, _ = pairs(content)
    first = content[: _outside_quotes(content, _sentence_ends(content), matched)]
    first = first.rstrip(" .!;:")
    if len(first) <= MAX_TITLE_CHARS:
        return first
    early = {o: c for o, c in matched.items() if o < MAX_TITLE_CHARS}
    closers = ""
    # Each quote the cut leaves open takes a character of the title's room.
    for _ in range(NESTED):
        room = MAX_TITLE_CHARS - 1 - len(closers)
        cut = len(first[:room].rsplit(" ", 1)[0].rstrip(" ,;:"))
        left_open = sorted((o for o, c in early.items() if o < cut <= c), reverse=True)
        wanted = "".join(_CLOSERS[first[o]][-1] for o in left_open)
        done = len(wanted) <= len(closers)
        closers = wanted
        if done:
            break
    return first[:cut] + "\u2026" + closers
