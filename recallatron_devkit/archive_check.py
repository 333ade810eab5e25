"""Whether a workspace's copy answers as the original does (docs/export.md,
Round trip): the same calls made for the same member in both, the answers
compared as JSON once the copy's member ids are read as the original's.
The export test and the export benchmark both use it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from recallatron.client import Client


def answer(call: Callable[[], Message]) -> str:
    """The call's answer as canonical JSON, or its status code when refused."""
    try:
        reply = call()
    except grpc.RpcError as exc:
        return f"error {exc.code().name}"
    return json.dumps(MessageToDict(reply), sort_keys=True)


@dataclass
class Calls:
    """What to ask: each kind of call and its arguments."""

    recalls: Sequence[tuple[str, str, str]] = ()  # (query, mode, purpose)
    reads: Sequence[str] = ()  # memory ids, one read each
    lookups: Sequence[str] = ()  # names and aliases
    neighbors: Sequence[str] = ()  # entity ids, two hops
    timelines: Sequence[tuple[str, str]] = ()  # (entity id, episode id); both empty: workspace
    purpose: str = "assist"


@dataclass
class Comparison:
    compared: dict[str, int] = field(default_factory=dict)
    same: dict[str, int] = field(default_factory=dict)
    # Recalls whose results (the memories, in order) agree, whatever their
    # scores and counts.
    same_results: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def add(self, kind: str, key: str, original: str, copy: str) -> None:
        self.compared[kind] = self.compared.get(kind, 0) + 1
        if kind.startswith("recall") and _result_ids(original) == _result_ids(copy):
            self.same_results[kind] = self.same_results.get(kind, 0) + 1
        if original == copy:
            self.same[kind] = self.same.get(kind, 0) + 1
        elif len(self.differences) < 20:
            # Long answers agree for a long way: show where they part.
            at = next(
                (i for i, (a, b) in enumerate(zip(original, copy, strict=False)) if a != b),
                min(len(original), len(copy)),
            )
            start = max(0, at - 200)
            self.differences.append(
                f"{kind} {key} (from character {at}):\n"
                f"  original {original[start : start + 600]}\n"
                f"  copy     {copy[start : start + 600]}"
            )


def _result_ids(text: str) -> list[str] | str:
    if not text.startswith("{"):
        return text
    results = json.loads(text).get("outcome", {}).get("results", [])
    return [r.get("memory", {}).get("id", "") for r in results]


def _calls(client: Client, calls: Calls) -> Iterable[tuple[str, str, Callable[[], Message]]]:
    p = calls.purpose
    for query, mode, purpose in calls.recalls:
        recall = partial(client.recall, query, mode=mode, purpose=purpose, skip_rerank=True)
        yield f"recall {mode}", f"{query!r} {purpose}", recall
    for memory_id in calls.reads:
        yield "read", memory_id, partial(client.read, [memory_id], purpose=p)
    for name in calls.lookups:
        yield "lookup", name, partial(client.lookup, name, purpose=p)
    for entity_id in calls.neighbors:
        yield "neighbors", entity_id, partial(client.neighbors, entity_id, hops=2, purpose=p)
    for entity_id, episode_id in calls.timelines:
        timeline = partial(client.timeline, entity_id, episode_id, purpose=p)
        yield "timeline", f"{entity_id}/{episode_id}", timeline


def compare(
    original: Client, copy: Client, calls: Calls, member_ids: dict[str, str], into: Comparison
) -> Comparison:
    """``member_ids``: the copy's member id -> the original's, so that an
    answer naming a member reads the same in both."""
    for (kind, key, ask_original), (_, _, ask_copy) in zip(
        _calls(original, calls), _calls(copy, calls), strict=True
    ):
        theirs = answer(ask_copy)
        for new, old in member_ids.items():
            theirs = theirs.replace(new, old)
        into.add(kind, key, answer(ask_original), theirs)
    return into


def record(client: Client, calls: Calls) -> list[tuple[str, str, str]]:
    """Every call's answer now, to be compared with a later asking."""
    return [(kind, key, answer(ask)) for kind, key, ask in _calls(client, calls)]


def compare_with_record(
    client: Client, calls: Calls, before: list[tuple[str, str, str]], into: Comparison
) -> Comparison:
    """The same calls asked again of ``client``, against ``before``: how much a
    workspace's answers move by themselves (say, after its vector index is
    built anew), the baseline for a copy's."""
    for (kind, key, earlier), (_, _, ask) in zip(before, _calls(client, calls), strict=True):
        into.add(kind, key, earlier, answer(ask))
    return into


def summary(result: Comparison) -> dict[str, Any]:
    return {
        "identical": result.identical,
        "compared": result.compared,
        "same": result.same,
        "same_results": result.same_results,
        "differences": result.differences[:5],
    }
