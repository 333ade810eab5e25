"""Retrieval datasets in BEIR's format (``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``), as `recallatron eval` and the benchmarks read them: the
documents (with the time a conversation's metadata gives them), the judged
queries with their category, and the memory each document becomes."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recallatron.vocabulary import MAX_BODY, MAX_TITLE


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    # When what it records was said (RFC 3339), from the corpus's metadata
    # ``date`` when it holds one; "" otherwise.
    occurred_at: str = ""


# Dates as conversation corpora write them ("1:56 pm on 8 May, 2023"), or ISO.
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


def occurred_at(metadata: dict[str, Any]) -> str:
    """The document's time as RFC 3339 (UTC), or "" when its metadata has no
    date this reads. A memory remembered with its time joins the episode open
    then (design §3.3): each dated session of a conversation becomes one."""
    text = str(metadata.get("date") or "").strip()
    for fmt in _DATE_FORMATS:
        try:
            when = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return when.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
    return ""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    category: str = ""


@dataclass
class Dataset:
    name: str
    documents: list[Document]
    queries: list[Query]
    # query id -> corpus id -> graded relevance (> 0)
    qrels: dict[str, dict[str, int]]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_dataset(directory: Path) -> Dataset:
    documents = [
        Document(
            str(d["_id"]),
            str(d.get("title") or ""),
            str(d.get("text") or ""),
            occurred_at(d.get("metadata") or {}),
        )
        for d in _jsonl(directory / "corpus.jsonl")
    ]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (directory / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) >= 3 and int(parts[2]) > 0:
                qrels[parts[0]][parts[1]] = int(parts[2])
    queries = []
    for q in _jsonl(directory / "queries.jsonl"):
        # Queries without judgements (or without text) cannot be scored.
        if str(q["_id"]) in qrels and str(q.get("text") or "").strip():
            category = (q.get("metadata") or {}).get("category", "")
            queries.append(Query(str(q["_id"]), str(q["text"]), str(category)))
    return Dataset(directory.resolve().name, documents, queries, dict(qrels))


def memory_text(doc: Document) -> tuple[str, str]:
    """(title, body) of the memory a document becomes. Documents without a
    title get their text's opening words as one."""
    text = doc.text.strip()
    title = doc.title.strip()
    if not title:
        title = text[:80].rsplit(" ", 1)[0] if len(text) > 80 else text
    return title[:MAX_TITLE], text[:MAX_BODY]
