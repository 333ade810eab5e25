"""Pictures of the operator's figures, drawn with matplotlib (imported only
when a picture is asked for): latency percentile distributions in the
HdrHistogram "nines" view, bars, and retrieval quality per mode and category.

Files are SVG (or PNG by suffix) written without a date or random ids, so a
rerun on the same figures gives the same file."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recallatron.refusal import Refused

# [percentile, ms] pairs, as recallatron_devkit.loadgen.Recorder.distribution gives.
Distribution = Sequence[Sequence[float]]

_NINES_LABELS = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]


def pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        # A setting of this machine, refused as a command refuses its input.
        raise Refused(
            "drawing needs matplotlib: pip install matplotlib (it is in the dev extra)"
        ) from None
    matplotlib.use("Agg")  # no display: files only
    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "recallatron",  # stable element ids
            "svg.fonttype": "none",  # text stays text: small and searchable
            "font.size": 9,
        }
    )
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata: dict[str, Any] = {"Date": None} if path.suffix == ".svg" else {}
    fig.savefig(path, metadata=metadata, bbox_inches="tight", dpi=120)
    return path


def nines_x(percentile: float) -> float:
    """Where a percentile sits on the nines axis: 90% at 1, 99% at 2, ..."""
    return -math.log10(1.0 - percentile / 100.0)


def latency_nines(
    panels: Sequence[tuple[str, Mapping[str, Distribution]]],
    path: Path,
    title: str,
) -> Path:
    """One panel per entry (side by side, same latency scale), one line per
    series: latency (ms) against percentile on the nines scale. The 100th
    percentile (the maximum) has no place on that scale and is left out."""
    plt = pyplot()
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.6 * len(panels), 3.4), sharey=True, squeeze=False
    )
    reach = 1.0
    for ax, (subtitle, series) in zip(axes[0], panels, strict=True):
        for label, points in series.items():
            kept = [(nines_x(p), ms) for p, ms in points if p < 100.0]
            if not kept:
                continue
            reach = max(reach, kept[-1][0])
            ax.plot([x for x, _ in kept], [ms for _, ms in kept], label=label, linewidth=1.4)
        ax.set_title(subtitle)
        ax.set_xlabel("percentile")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", frameon=False)
    ticks = list(range(0, min(len(_NINES_LABELS), math.ceil(reach) + 1)))
    for ax in axes[0]:
        ax.set_xticks(ticks, _NINES_LABELS[: len(ticks)])
        ax.set_xlim(0, ticks[-1])
    axes[0][0].set_ylabel("latency, ms")
    fig.suptitle(title, y=1.03)
    path = _save(fig, path)
    plt.close(fig)
    return path


def grouped_bars(
    groups: Mapping[str, Mapping[str, float]],
    path: Path,
    title: str,
    value_label: str,
    horizontal: bool = True,
) -> Path:
    """Bars by category (the inner keys, in the order of the first group),
    one bar per group side by side, each labelled with its value."""
    plt = pyplot()
    names = list(dict.fromkeys(k for g in groups.values() for k in g))
    count = max(1, len(groups))
    width = 0.8 / count
    size = (6.4, 0.28 * len(names) * count + 1.2) if horizontal else (6.4, 3.4)
    fig, ax = plt.subplots(figsize=size)
    for i, (group, values) in enumerate(groups.items()):
        offsets = [j + (i - (count - 1) / 2) * width for j in range(len(names))]
        heights = [values.get(n, 0.0) for n in names]
        bars = (ax.barh if horizontal else ax.bar)(offsets, heights, width, label=group)
        ax.bar_label(bars, fmt="%.3g", padding=2, fontsize=7)
    # Room for the value labels past the longest bar.
    ax.margins(**({"x": 0.08} if horizontal else {"y": 0.08}))
    if horizontal:
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()  # the first category on top
        ax.set_xlabel(value_label)
        ax.grid(True, axis="x", alpha=0.3)
    else:
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel(value_label)
        ax.grid(True, axis="y", alpha=0.3)
    if count > 1:
        ax.legend(frameon=False, loc="lower right")
    ax.set_title(title)
    path = _save(fig, path)
    plt.close(fig)
    return path


def eval_plot(report: Mapping[str, Any], path: Path, metrics: Sequence[str] = ()) -> Path:
    """`recallatron eval --plot`: recall@k per mode (all queries) beside
    recall@10 per mode in each query category."""
    plt = pyplot()
    modes = list(report)
    ks = list(metrics) or [m for m in ("recall@5", "recall@10") if m in report[modes[0]]]
    categories = sorted({c for r in report.values() for c in r.get("per_category", {})})
    panels = 2 if categories else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(4.2 + 3.0 * (panels - 1) + 0.35 * len(categories), 3.4), squeeze=False
    )
    width = 0.8 / max(1, len(modes))

    def bars(ax: Any, labels: Sequence[str], value: Any) -> None:
        for i, mode in enumerate(modes):
            offsets = [j + (i - (len(modes) - 1) / 2) * width for j in range(len(labels))]
            drawn = ax.bar(offsets, [value(mode, label) for label in labels], width, label=mode)
            ax.bar_label(drawn, fmt="%.2f", padding=1, fontsize=6)
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylim(0, 1.12)  # room for the legend above the bars
        ax.grid(True, axis="y", alpha=0.3)

    overall = axes[0][0]
    bars(overall, ks, lambda mode, k: report[mode][k])
    overall.set_title(f"all queries ({report[modes[0]]['queries']})")
    overall.set_ylabel("share of relevant documents found")
    overall.legend(frameon=False, loc="upper left", ncol=len(modes))
    if categories:
        by_category = axes[0][1]
        bars(
            by_category,
            categories,
            lambda mode, c: report[mode].get("per_category", {}).get(c, {}).get("recall@10", 0.0),
        )
        by_category.set_title("recall@10 by query category")
        if max(len(c) for c in categories) > 6:
            by_category.tick_params(axis="x", labelrotation=30)
    fig.suptitle("recallatron eval: " + ", ".join(modes), y=1.03)
    path = _save(fig, path)
    plt.close(fig)
    return path
