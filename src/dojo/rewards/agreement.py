"""How far a judge agrees with people: accuracy, Cohen's kappa, Krippendorff's alpha, a confusion
matrix and a calibration curve, over a review set's labelled items (``dojo.rewards.review``).

- ``cohen_kappa(a, b)``: chance-corrected agreement of two raters, ``(p_o - p_e) / (1 - p_e)``;
- ``krippendorff_alpha(units)``: nominal alpha for any number of raters with missing ratings,
  ``1 - D_o / D_e`` from the coincidence matrix (Krippendorff, "Computing Krippendorff's
  Alpha-Reliability", 2011; its 4-observer example gives 0.743, checked by a test);
- ``agreement(items, labels)``: the judge's label against each item's majority human label (items
  whose labellers tie are left out), with alpha among the labellers and with the judge as one more;
- ``calibration_plot``: the share of human ``pass`` per bin of judge score (matplotlib, Agg);
- ``AgreementMonitor``: during a run, agreement on the items labelled so far as a metric, and a
  warning (log line and ``judge/agreement_alert`` = 1) when it drops below a threshold.
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dojo.errors import InputError
from dojo.rewards.review import LABELS, SKIP, Label, ReviewItem, latest, read_items, read_labels

log = logging.getLogger(__name__)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels of the same items (1.0 when both agree and chance explains
    nothing; nan when there is nothing to compare)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} labels against {len(b)}")
    n = len(a)
    if not n:
        return math.nan
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = collections.Counter(a), collections.Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else math.nan
    return (observed - expected) / (1 - expected)


def krippendorff_alpha(units: Sequence[Sequence[Hashable | None]]) -> float:
    """Nominal Krippendorff's alpha: ``units[u]`` holds each rater's value for unit u (None: missing)."""
    coincidence: dict[tuple[Hashable, Hashable], float] = collections.defaultdict(float)
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue  # a unit rated once carries no information about agreement
        for i, c in enumerate(values):
            for j, k in enumerate(values):
                if i != j:
                    coincidence[(c, k)] += 1 / (m - 1)
    n = sum(coincidence.values())
    if n <= 1:
        return math.nan
    totals: dict[Hashable, float] = collections.defaultdict(float)
    for (c, _), w in coincidence.items():
        totals[c] += w
    disagree = sum(w for (c, k), w in coincidence.items() if c != k)
    expected = sum(totals[c] * totals[k] for c in totals for k in totals if c != k) / (n - 1)
    if expected == 0:
        return 1.0 if disagree == 0 else math.nan
    return 1 - disagree / expected


@dataclass
class Agreement:
    """The judge against people on a review set's labelled items."""

    items: int  # labelled items compared (majority label, ties left out)
    labellers: int
    accuracy: float
    kappa: float
    alpha_labellers: float  # among the labellers (nan with one)
    alpha_with_judge: float  # the labellers and the judge
    confusion: dict[str, dict[str, int]]  # judge label -> human label -> count
    pairs: list[tuple[float, str]] = field(default_factory=list)  # (judge score, human label)

    @property
    def disagreement(self) -> float:
        return 1 - self.accuracy

    def as_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "labellers": self.labellers,
            "accuracy": self.accuracy,
            "disagreement": self.disagreement,
            "cohen_kappa": self.kappa,
            "krippendorff_alpha_labellers": self.alpha_labellers,
            "krippendorff_alpha_with_judge": self.alpha_with_judge,
            "confusion": self.confusion,
        }


def agreement(items: Sequence[ReviewItem], labels: Sequence[Label]) -> Agreement:
    """Compare each labelled item's judge label with its majority human label (see the module doc)."""
    by_item: dict[str, dict[str, str]] = collections.defaultdict(dict)
    for (item_id, labeller), value in latest(labels).items():
        by_item[item_id][labeller] = value
    known = {item.item_id: item for item in items}
    if unknown := sorted(set(by_item) - set(known)):
        raise InputError(f"labels for items that are not in the review set: {unknown[:5]}")
    labellers = sorted({who for votes in by_item.values() for who in votes})
    judge, human, pairs, units, units_judge = [], [], [], [], []
    for item_id, votes in by_item.items():
        item = known[item_id]
        units.append([votes.get(who) for who in labellers])
        units_judge.append([*units[-1], item.judge_label])
        counts = collections.Counter(votes.values()).most_common()
        if len(counts) > 1 and counts[0][1] == counts[1][1]:
            continue  # the labellers tie: no majority to compare with
        judge.append(item.judge_label)
        human.append(counts[0][0])
        pairs.append((item.judge_score, counts[0][0]))
    if not judge:
        raise InputError("no labelled item to compare: label some items first (dojo judge label)")
    confusion: dict[str, dict[str, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    for j, h in zip(judge, human, strict=True):
        confusion[j][h] += 1
    return Agreement(
        items=len(judge),
        labellers=len(labellers),
        accuracy=sum(j == h for j, h in zip(judge, human, strict=True)) / len(judge),
        kappa=cohen_kappa(judge, human),
        alpha_labellers=krippendorff_alpha(units) if len(labellers) > 1 else math.nan,
        alpha_with_judge=krippendorff_alpha(units_judge),
        confusion={j: dict(h) for j, h in confusion.items()},
        pairs=pairs,
    )


def calibration(
    pairs: Sequence[tuple[float, str]], bins: int = 10, positive: str = "pass"
) -> list[tuple[float, float, int]]:
    """(bin centre, share of human ``positive``, items) for each non-empty bin of judge score."""
    counts = [[0, 0] for _ in range(bins)]
    for score, label in pairs:
        b = min(bins - 1, int(score * bins))
        counts[b][0] += label == positive
        counts[b][1] += 1
    return [((b + 0.5) / bins, hit / n, n) for b, (hit, n) in enumerate(counts) if n]


def calibration_plot(pairs: Sequence[tuple[float, str]], path: Path, bins: int = 10) -> Path:
    """A PNG of judge score against the share of human passes (the diagonal is a calibrated judge)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = calibration(pairs, bins)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
    if points:
        xs, ys, _ = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label="judge")
        for x, y, n in points:
            ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    ax.set_xlabel("judge score")
    ax.set_ylabel("share labelled pass by people")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(f"judge calibration ({len(pairs)} items)")
    ax.legend(loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


class AgreementMonitor:
    """Agreement on a review set's items labelled so far, checked while a run goes on.

    ``check()`` rereads the labels (people label while the run trains) and returns the metrics
    ``judge/agreement``, ``judge/agreement_items`` and ``judge/agreement_alert`` (1 when at least
    ``min_items`` are labelled and the accuracy is below ``threshold``, with a warning logged).
    A review set it cannot read (a line half written, a bad label) counts as nothing labelled, with
    a warning: the run it watches goes on."""

    def __init__(self, review_dir: Path, *, threshold: float = 0.75, min_items: int = 20) -> None:
        self.review_dir = Path(review_dir)
        self.threshold = threshold
        self.min_items = min_items
        self.alerts = 0
        self._problem = ""  # the last reason the review set could not be read

    def check(self) -> dict[str, float]:
        nothing = {"judge/agreement_items": 0.0, "judge/agreement_alert": 0.0}
        if not (self.review_dir / LABELS).is_file():
            return nothing
        try:
            labels = read_labels(self.review_dir / LABELS)
            if all(label.label == SKIP for label in labels):
                return nothing  # nothing labelled yet
            found = agreement(read_items(self.review_dir), labels)
        except InputError as e:
            if str(e) != self._problem:  # once per problem, not at every step
                log.warning("judge agreement not checked (%s): %s", self.review_dir, e)
            self._problem = str(e)
            return nothing
        self._problem = ""
        alert = found.items >= self.min_items and found.accuracy < self.threshold
        if alert:
            self.alerts += 1
            log.warning(
                "judge agreement %.3f is below %.3f on %d labelled items (%s): check the judge",
                found.accuracy,
                self.threshold,
                found.items,
                self.review_dir,
            )
        return {
            "judge/agreement": found.accuracy,
            "judge/agreement_kappa": found.kappa,
            "judge/agreement_items": float(found.items),
            "judge/agreement_alert": float(alert),
        }
