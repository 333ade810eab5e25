"""The load tool: its arithmetic (unit) and a short smoke run against the
test stack (shape and zero errors; no timing thresholds)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks import recall_bench
from recallatron_devkit import synthetic
from recallatron_devkit.load import format_result, parse_classes, read_queries
from recallatron_devkit.loadgen import (
    QueryMix,
    Recorder,
    class_summary,
    measure,
    open_loop_offsets,
    run_open_loop,
)


def test_percentiles_from_a_known_latency_list() -> None:
    r = Recorder()
    for ms in range(1, 1001):  # 1..1000 ms
        r.record(ms / 1000)
    s = r.summary(elapsed_s=10.0)
    # HdrHistogram keeps 3 significant digits: within 0.1%.
    assert s["p50_ms"] == pytest.approx(500, rel=1e-3)
    assert s["p95_ms"] == pytest.approx(950, rel=1e-3)
    assert s["p99_ms"] == pytest.approx(990, rel=1e-3)
    assert s["p999_ms"] == pytest.approx(999, rel=1e-3)
    assert s["max_ms"] == pytest.approx(1000, rel=1e-3)
    assert s["requests"] == 1000 and s["throughput_rps"] == 100.0 and s["errors"] == {}


def test_errors_are_counted_by_status_and_not_timed() -> None:
    r = Recorder()
    r.record(0.010)
    r.record(0.5, "UNAVAILABLE")
    r.record(0.5, "UNAVAILABLE")
    r.record(0.5, "DEADLINE_EXCEEDED")
    s = r.summary(elapsed_s=1.0)
    assert s["errors"] == {"UNAVAILABLE": 2, "DEADLINE_EXCEEDED": 1}
    assert s["requests"] == 4 and s["max_ms"] == pytest.approx(10, rel=1e-2)


def test_open_loop_schedule_is_fixed_rate() -> None:
    assert open_loop_offsets(4, 1.0) == [0.0, 0.25, 0.5, 0.75]
    assert len(open_loop_offsets(100, 2.5)) == 250
    assert open_loop_offsets(0, 5) == []


def test_open_loop_counts_from_the_intended_send_time() -> None:
    """A stall delays the clock of every later request: with a fake clock, a
    call that takes 1 s at 10 req/s makes the next requests wait for a worker,
    and their latency includes that wait."""
    now = [0.0]
    recorder = Recorder()

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def call(i: int) -> None:
        if i == 0:
            now[0] += 1.0  # the stall: the clock moves while the only worker is busy

    run_open_loop(
        call, rate=10, duration_s=0.5, recorder=recorder, max_workers=1, clock=clock, sleep=sleep
    )
    s = recorder.summary(elapsed_s=1.0)
    assert s["requests"] == 5
    # Request 0 took 1 s; the later ones waited for it, and that wait counts
    # (a closed-loop clock would have started them only after it).
    assert s["max_ms"] >= 999
    assert s["p50_ms"] >= 599


def test_synthetic_data_is_deterministic_and_varied() -> None:
    a = list(synthetic.memories(500, seed=3))
    assert a == list(synthetic.memories(500, seed=3))
    assert a != list(synthetic.memories(500, seed=4))
    assert {m.kind for m in a} == {"note", "fact", "decision", "summary"}
    assert len({m.body for m in a}) > 450
    assert any(m.derived_from for m in a)
    assert len(set(synthetic.queries(100))) > 50


# -- the query mix ----------------------------------------------------------------


def _corpus_words(count: int, seed: int = 7, members: int = 8) -> set[str]:
    """The rare words the memories' bodies really carry."""
    return {
        w
        for m in synthetic.memories(count, seed, members)
        for w in re.findall(r"Ref (\w+)\.", m.body)
    }


def test_the_memories_are_unchanged_by_the_query_mix() -> None:
    """Seeded workspaces (a 100k one among them) are reused: adding the
    query mix must not change what memories() yields. The digest is of the
    memories as they were before it."""
    digest = hashlib.sha256(repr(list(synthetic.memories(120, 7, 8))).encode()).hexdigest()
    assert digest == "5bdff2ffe2270607e47e220a6322367c6a7f7dfd6f8278b710dc19fca96d79ef"


def test_query_mix_is_deterministic_from_the_seeds() -> None:
    a = synthetic.query_mix(300, 2000, corpus_seed=7, seed=8)
    assert a == synthetic.query_mix(300, 2000, corpus_seed=7, seed=8)
    assert a != synthetic.query_mix(300, 2000, corpus_seed=7, seed=9)
    assert list(a) == list(synthetic.QUERY_CLASSES)
    # Choosing classes does not change another class's queries.
    only = synthetic.query_mix(300, 2000, corpus_seed=7, seed=8, classes=["entity", "rare"])
    assert list(only) == ["entity", "rare"]
    assert only["entity"] == a["entity"] and only["rare"] == a["rare"]


def test_query_classes_are_disjoint_non_empty_and_distinct() -> None:
    mix = synthetic.query_mix(2000, 10_000)
    keys = {name: {synthetic.normal_query(q) for q in qs} for name, qs in mix.items()}
    for name, qs in mix.items():
        assert qs, name
        assert len(keys[name]) == len(qs), f"{name} repeats a query"
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not keys[a] & keys[b], (a, b)
    # Entity queries name a person or a project; common ones name neither.
    names_known = [*synthetic.PEOPLE, *synthetic.PROJECTS]
    assert all(any(n in q for n in names_known) for q in mix["entity"])
    assert not any(n in q for q in mix["common"][:500] for n in names_known)
    people = sum(any(p in q for p in synthetic.PEOPLE) for q in mix["entity"][:200])
    assert 50 < people < 150  # people and projects both


@pytest.mark.parametrize("count", [120, 2000, 10_000])
def test_rare_queries_use_words_the_corpus_of_that_size_holds(count: int) -> None:
    words = _corpus_words(count)
    # The replay of memories()' rare draws finds exactly the words it wrote.
    assert set(synthetic.rare_words_used(count, 7)) == words
    assert len(words) <= synthetic.rare_vocabulary(count)
    rare = synthetic.query_mix(500, count, corpus_seed=7)["rare"]
    assert rare
    pseudo = re.compile(r"\b(?:" + "|".join(synthetic.SYLLABLES) + r"){4}\b")
    for q in rare:
        found = pseudo.findall(q)
        assert len(found) == 1 and found[0] in words, q


def test_a_small_corpus_has_few_rare_queries_and_a_tiny_one_none() -> None:
    # 120 memories hold 6 rare words: 6 * (5 + 30 topics) queries at most.
    assert len(synthetic.query_mix(5000, 120)["rare"]) <= 6 * 35
    assert synthetic.query_mix(10, 0)["rare"] == []
    with pytest.raises(ValueError, match="rare"):
        QueryMix(synthetic.query_mix(10, 0))


def test_no_repeats_until_the_pool_is_used_up() -> None:
    pools = {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "c": ["c1"]}
    mix = QueryMix(pools)
    # Round robin; c (one query) repeats first, at request 1 * 3 + 2.
    assert [mix.at(i) for i in range(6)] == ["a1", "b1", "c1", "a2", "b2", "c1"]
    assert mix.capacity() == 5
    sent = [mix.take(i) for i in range(mix.capacity())]
    assert len(set(sent)) == len(sent) and mix.distinct() == 5 and not mix.repeats
    mix.take(5)
    assert mix.repeats == {"c": 1} and mix.distinct() == 5
    # Repeats are judged as a cache folding case and spaces would.
    folded = QueryMix({"x": ["Ref  Kaka", "ref kaka"]})
    folded.take(0)
    folded.take(1)
    assert folded.distinct() == 1


def _fake_recall(sent: list[str]) -> Any:
    def recall(query: str) -> None:
        sent.append(query)
        time.sleep(0.0005)

    return recall


def test_a_run_stops_when_a_class_is_used_up_unless_repeats_are_allowed() -> None:
    pools = synthetic.query_mix(40, 2000)
    sent: list[str] = []
    r = measure(_fake_recall(sent), QueryMix(pools), 30.0, concurrency=3, warmup=20)
    # Warm-up takes at most a tenth, then every distinct query once, no more.
    assert len(sent) == 160 and len(set(sent)) == 160
    assert r["exhausted"] and r["repeats"] == 0
    assert r["requests"] == r["distinct_queries"] == 160 - 16
    sent.clear()
    r = measure(_fake_recall(sent), QueryMix(pools), 0.5, concurrency=2, allow_repeats=True)
    assert not r["exhausted"] and r["requests"] > 160
    assert r["distinct_queries"] == 160 and r["repeats"] == r["requests"] - 160


def test_an_open_loop_run_is_cut_to_the_pools_too() -> None:
    pools = synthetic.query_mix(10, 2000)
    sent: list[str] = []
    r = measure(_fake_recall(sent), QueryMix(pools), 0.5, rate=200)
    assert r["requests"] == len(set(sent)) == 40 and r["exhausted"]
    r = measure(_fake_recall([]), QueryMix(pools), 0.1, rate=200)
    assert r["requests"] == 20 and not r["exhausted"]
    assert all(c["requests"] == 5 for c in r["classes"].values())


def test_per_class_summary_in_the_json() -> None:
    pools = synthetic.query_mix(500, 2000)
    r = measure(_fake_recall([]), QueryMix(pools), 0.3, concurrency=2, warmup=5)
    r = json.loads(json.dumps(r))
    # The existing top-level keys stay; classes come on top.
    for key in ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "requests", "errors"):
        assert key in r
    assert list(r["classes"]) == list(synthetic.QUERY_CLASSES)
    for c in r["classes"].values():
        assert {"p50_ms", "p99_ms", "requests"} <= set(c)
        assert c["requests"] > 0 and 0 < c["p50_ms"] <= c["p99_ms"]
    assert sum(c["requests"] for c in r["classes"].values()) == r["requests"]
    # Round robin: the classes' counts differ by at most one.
    counts = [c["requests"] for c in r["classes"].values()]
    assert max(counts) - min(counts) <= 1
    r.update(
        mode="hybrid",
        rerank=False,
        memories=2000,
        concurrency=2,
        rate=None,
        duration_s=0.3,
        member=0,
        purpose="audit",
        visible_share=0.06,
    )
    text = format_result(r)
    for name in synthetic.QUERY_CLASSES:
        assert re.search(rf"^{name} +[\d.]+ +[\d.]+ +\d+$", text, re.M), text
    assert "distinct queries" in text and "member 0 for audit" in text


def test_open_loop_records_per_class() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def call(i: int) -> None:
        now[0] += 0.01 if i % 2 == 0 else 0.0

    overall = Recorder()
    by = {"even": Recorder(), "odd": Recorder()}
    run_open_loop(
        call,
        rate=10,
        duration_s=1.0,
        recorder=overall,
        max_workers=1,
        clock=clock,
        sleep=sleep,
        by_class=lambda i: by["even" if i % 2 == 0 else "odd"],
        max_requests=6,
    )
    assert overall.requests == 6 and by["even"].requests == 3 and by["odd"].requests == 3


def test_classes_option_and_queries_file(tmp_path: Path) -> None:
    assert parse_classes(None, has_file=False) == list(synthetic.QUERY_CLASSES)
    assert parse_classes(None, has_file=True) == ["file"]
    assert parse_classes("rare, common", has_file=False) == ["rare", "common"]
    assert parse_classes("rare", has_file=True) == ["rare", "file"]
    with pytest.raises(ValueError, match="unknown"):
        parse_classes("rare,nope", has_file=False)
    with pytest.raises(ValueError, match="--queries"):
        parse_classes("file", has_file=False)
    path = tmp_path / "q.txt"
    path.write_text("first query\n\n  second  \nFirst  query\n   \n")
    assert read_queries(path) == ["first query", "second"]
    assert read_queries(path, allow_repeats=True) == ["first query", "second", "First  query"]


def test_the_narrow_caller_sees_about_five_percent() -> None:
    """Member 0 (the owner) recalling for audit, 8 members: about 5.6% of the
    workspace (half the memories are workspace-wide, plus member 0's own
    private eighth of the rest; a tenth are for audit)."""
    share = synthetic.visible_share(10_000, 7, members=8, member=0, purpose="audit")
    assert 0.05 < share < 0.065
    assist = synthetic.visible_share(10_000, 7, members=8, member=0, purpose="assist")
    assert 0.5 < assist < 0.6
    assert synthetic.visible_share(500, 7, members=1) == 1.0


# -- the benchmark's tables -------------------------------------------------------


def _run(p50: float, per_class: dict[str, float]) -> dict[str, Any]:
    return {
        "p50_ms": p50,
        "p95_ms": p50 * 2,
        "p99_ms": p50 * 3,
        "p999_ms": p50 * 4,
        "max_ms": p50 * 5,
        "throughput_rps": 10.0,
        "requests": 100,
        "errors": {},
        "distinct_queries": 100,
        "classes": {
            k: {"p50_ms": v, "p99_ms": v * 3, "requests": 25} for k, v in per_class.items()
        },
    }


def _size(n: int, scale: float) -> dict[str, Any]:
    cls = {"rare": 4.0 * scale, "common": 8.0 * scale, "entity": 5.0, "question": 6.0 * scale}
    return {
        "memories": n,
        "closed": {"hybrid@c1": _run(6.0 * scale, cls), "hybrid@c8": _run(12.0 * scale, cls)},
        "narrow_share": 0.0556,
        "narrow": {"hybrid@c1": _run(3.0 * scale, cls)},
        "open": {20: _run(7.0, cls)},
        "split": {
            "in_process_p50_ms": 3.0,
            "in_process_cards_p50_ms": 3.2,
            "services_p50_ms": 6.0,
            "ratio": 1.88,
            "ratio_pipeline_only": 2.0,
            "in_process_cpu_ms": 2.5,
        },
        "stages": {"recall": 5.0},
        "writes": {
            "remember": {"p50_ms": 1.0, "p99_ms": 2.0},
            "embedded": 10,
            "embedding_per_s": 5.0,
            "recall_under_writes": {"p50_ms": 1.0, "p99_ms": 2.0},
        },
    }


def test_bench_class_rows_and_growth_per_class() -> None:
    small, large = _size(10_000, 1.0), _size(100_000, 2.0)
    assert recall_bench.class_rows(small["closed"]) == [
        "| hybrid | 1 | 4.0 / 12.0 | 8.0 / 24.0 | 5.0 / 15.0 | 6.0 / 18.0 | 100 |",
        "| hybrid | 8 | 4.0 / 12.0 | 8.0 / 24.0 | 5.0 / 15.0 | 6.0 / 18.0 | 100 |",
    ]
    assert recall_bench.narrow_rows(small["narrow"], small["closed"]) == [
        "| hybrid | 3.0 | 4.0 | 8.0 | 5.0 | 6.0 | 6.0 |"
    ]
    assert recall_bench.growth_rows(small, large) == [
        "| hybrid | 1 | owner, assist | 2.0 | 2.0 | 2.0 | 1.0 | 2.0 |",
        "| hybrid | 8 | owner, assist | 2.0 | 2.0 | 2.0 | 1.0 | 2.0 |",
        "| hybrid | 1 | narrow: owner, audit | 2.0 | 2.0 | 2.0 | 1.0 | 2.0 |",
    ]
    # A zero base gives no ratio rather than a division error.
    small["closed"]["hybrid@c1"]["classes"]["rare"]["p50_ms"] = 0.0
    assert recall_bench.growth_rows(small, large)[0].split(" | ")[4] == "-"
    text = recall_bench.render([small, large], ["--memories", "10000", "100000"])
    assert "By query class" in text and "Narrow caller: member 0 recalling for audit" in text
    assert "5.6% of the workspace" in text and "rare 12.0" in text
    assert "| mode | concurrency | caller | all | rare | common | entity | question |" in text


def test_bench_mix_sequence_is_round_robin_without_repeats() -> None:
    pools = synthetic.query_mix(50, 2000)
    seq = recall_bench.mix_sequence(pools)
    assert len(seq) == len(set(seq)) == 200
    assert seq[:4] == [pools[c][0] for c in synthetic.QUERY_CLASSES]


@pytest.mark.integration
def test_load_smoke_run_against_the_stack(stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {"RECALLATRON_ADMIN_TOKEN": stack.admin_token}

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "recallatron_cli.main",
            "load",
            "--gateway",
            stack.gateway,
            "--memories",
            "120",
            "--concurrency",
            "2",
            "--duration",
            "2",
            "--mode",
            "hybrid",
            "--json",
            "--state-dir",
            str(tmp_path),
            "--embed-timeout",
            "300",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    # stdout is the answer alone; progress went to stderr as plain lines (no terminal).
    result = json.loads(proc.stdout)
    assert "seeding: 120/120 memories (100%), done in" in proc.stderr
    assert re.search(r"embedding: \d+/\d+ memories \(100%\), done in", proc.stderr)
    assert "\x1b[" not in proc.stderr
    for key in (
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "throughput_rps",
        "requests",
        "errors",
        "mode",
        "memories",
    ):
        assert key in result
    assert result["errors"] == {} and result["requests"] > 0
    assert result["mode"] == "hybrid" and result["memories"] == 120
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    # Every class of the default mix was sent and timed; no query twice.
    assert list(result["classes"]) == list(synthetic.QUERY_CLASSES)
    for name, c in result["classes"].items():
        assert c["requests"] > 0, name
        assert 0 < c["p50_ms"] <= c["p99_ms"], name
    assert sum(c["requests"] for c in result["classes"].values()) == result["requests"]
    assert result["repeats"] == 0 and result["distinct_queries"] == result["requests"]

    # Open loop, a narrow caller and a file of queries with a built-in class,
    # on the workspace seeded above (reused).
    queries = tmp_path / "queries.txt"
    queries.write_text("billing migration\n\nwho owns Amber Atlas\nsearch latency\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "recallatron_cli.main",
            "load",
            "--gateway",
            stack.gateway,
            "--memories",
            "120",
            "--rate",
            "4",
            "--duration",
            "3",
            "--queries",
            str(queries),
            "--classes",
            "rare",
            "--member",
            "1",
            "--purpose",
            "audit",
            "--json",
            "--state-dir",
            str(tmp_path),
            "--embed-timeout",
            "300",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    narrow = json.loads(proc.stdout.strip().splitlines()[-1])
    assert narrow["errors"] == {} and narrow["member"] == 1 and narrow["purpose"] == "audit"
    assert list(narrow["classes"]) == ["rare", "file"]
    # Three file queries (the blank line skipped) and four rare ones, then
    # the run stops (of 12 scheduled) rather than repeat one.
    assert narrow["classes"]["file"]["requests"] == 3 and narrow["repeats"] == 0
    assert narrow["classes"]["rare"]["requests"] == 4 and narrow["exhausted"]


def test_the_distribution_climbs_the_nines_to_the_maximum() -> None:
    r = Recorder()
    for ms in range(1, 1001):
        r.record(ms / 1000)
    points = r.distribution()
    percentiles = [p for p, _ in points]
    assert percentiles[0] == 0.0 and percentiles[-1] == 100.0
    assert 90.0 in percentiles and 99.0 in percentiles and 99.9 in percentiles
    # 1,000 samples resolve nothing past 99.9%: the next point is the maximum.
    assert percentiles[-2] == 99.9
    assert [ms for _, ms in points] == sorted(ms for _, ms in points)
    assert dict(points)[99.0] == pytest.approx(990, rel=1e-3)
    assert points[-1][1] == pytest.approx(1000, rel=1e-3)
    assert Recorder().distribution() == []
    assert r.summary(1.0)["distribution"] == points


def test_bench_pictures_are_drawn_from_the_results(tmp_path: Path) -> None:
    from benchmarks import plots

    def run(base: float) -> dict[str, Any]:
        r = Recorder()
        for ms in range(1, 201):
            r.record(base * (1 + ms / 200) / 1000)
        s = r.summary(1.0)
        s["classes"] = {c: class_summary(r, 200) for c in synthetic.QUERY_CLASSES}
        return s

    results = [
        {
            "memories": n,
            "closed": {f"{m}@c{c}": run(scale * c) for m in ("lexical", "hybrid") for c in (1, 8)},
            "stages": {"cpu_ms": {"postgres": 6.8 * scale, "embed": 3.4, "gateway": 0.9}},
        }
        for n, scale in ((10_000, 1.0), (100_000, 1.4))
    ]
    drawn = plots.bench_pictures(results, tmp_path / "docs" / "benchmarks")
    names = [path.name for _, path in drawn]
    assert names == [
        "latency-c1.svg",
        "latency-c8.svg",
        "latency-classes.svg",
        "cpu-per-recall.svg",
    ]
    c1 = (tmp_path / "docs" / "benchmarks" / "latency-c1.svg").read_text()
    for label in ("10,000 memories", "100,000 memories", "lexical", "hybrid", "99.9%"):
        assert label in c1, label
    assert "hybrid+rerank" not in c1
    classes = (tmp_path / "docs" / "benchmarks" / "latency-classes.svg").read_text()
    assert all(c in classes for c in synthetic.QUERY_CLASSES)
    cpu = (tmp_path / "docs" / "benchmarks" / "cpu-per-recall.svg").read_text()
    assert "postgres" in cpu and "9.52" in cpu  # 6.8 x 1.4, labelled on its bar
    page = tmp_path / "docs" / "benchmarks.md"
    assert plots.markdown(drawn, page)[0] == (
        "![Recall latency by percentile, one client, one line per mode](benchmarks/latency-c1.svg)"
    )


class _RecordingClient:
    """Stands in for a member's client in the seed: records each write's
    request id and call, answers after a delay of the caller's choosing."""

    def __init__(self, calls: dict[str, str], delay: Any) -> None:
        self.calls = calls
        self.delay = delay

    def _answer(self, call: str, request_id: str) -> Any:
        time.sleep(self.delay(request_id))
        self.calls[request_id] = call
        memory = type("M", (), {"id": f"id-{request_id}"})()
        return type("R", (), {"memory": memory})()

    def remember(self, *args: Any, request_id: str, **kwargs: Any) -> Any:
        return self._answer("remember", request_id)

    def derive(self, sources: list[str], *args: Any, request_id: str, **kwargs: Any) -> Any:
        assert all(sources), "a derivation written before its sources"
        return self._answer("derive", request_id)


def test_a_seed_makes_the_same_call_for_each_request_id_however_writes_finish() -> None:
    """A rerun of an interrupted seed replays its request ids: each must be
    the same call as the first time, or the store refuses it ("request_id
    already used for a different call"). A derivation's sources are written
    just before it, by other threads; it must wait for them, never fall back
    to a told memory because they are still being written."""
    from recallatron_devkit.seeding import _seed

    count, members = 300, 1
    items = list(synthetic.memories(count, 7, members=members))
    derived = {f"load-7-{i}" for i, m in enumerate(items) if m.derived_from}
    assert derived  # the corpus has derivations to check

    def slow_sources(request_id: str) -> float:
        # Told memories answer slowly: a derivation's sources, written just
        # before it by the other threads, are still in flight when it starts.
        return 0.0 if request_id in derived else 0.01

    runs = []
    for delay in (slow_sources, lambda _rid: 0.0):
        calls: dict[str, str] = {}
        _seed([_RecordingClient(calls, delay) for _ in range(members)], count, 7)  # type: ignore[list-item]
        runs.append(calls)
    assert runs[0] == runs[1]
    assert {rid for rid, call in runs[0].items() if call == "derive"} == derived
