"""Retrieval metrics over a gold set: pure functions, no I/O.

Rules (each one is unit-tested on hand-computed cases):

- Relevance is binary: an id is relevant iff it is in the query's expected ids.
- Duplicates: a ranked list is de-duplicated before any cutoff, keeping the FIRST occurrence
  (and its score). Later copies are dropped and do not use up a rank position, so a system
  cannot earn credit twice for one id nor be charged twice for it.
- Scores and ties: when a prediction carries scores, ids are re-sorted by score, highest first.
  ``ties="given"`` keeps the submitted order inside a group of equal scores (stable sort);
  ``ties="pessimistic"`` puts the non-relevant ids of a tie group before the relevant ones, so
  a tie never earns more than a strict ordering would. Without scores the list order is final.
- hit@k = 1 if any relevant id is in the top k, else 0.
- recall@k = |relevant ∩ top k| / |relevant|.
- precision@k = |relevant ∩ top k| / k (the denominator is k even when fewer ids came back).
- MRR@10 = 1 / rank of the first relevant id within the top 10, else 0.
- nDCG@10 = DCG / IDCG with gain 1 and discount 1 / log2(rank + 1);
  IDCG puts min(|relevant|, 10) relevant ids first.
- An empty result scores 0 on every metric.
- Window recall@k (only when the prediction carries ``doc_windows``) = |relevant ∩ (top k ∪ their windows)| /
  |relevant|: a gold id inside a returned window counts; the per-turn recall@k is unchanged.
- Aggregation is a macro average over queries: per category, ``overall`` (every query with
  expected ids outside the abstention categories) and ``all_with_gold`` (every query with
  expected ids, the population the public LoCoMo reference numbers use).
- Abstention: queries in an abstention category (default: LoCoMo's ``adversarial``) keep their
  own category row, flagged, and stay out of ``overall``. Queries with NO expected ids cannot be
  scored for recall: they are excluded from every average and reported in ``abstention``
  (how many, and the share that correctly returned nothing).
- Leak rate = share of ALL queries (abstention included) whose returned ids of the scored target
  include at least one id the viewer may not see, judged by a ``Visibility`` callable.
  It must be 0. Without a visibility callable the leak rate is ``None`` (not measured).
- A gold query with no prediction counts as an empty result and is listed in
  ``missing_predictions``; predictions for unknown qids are ignored and listed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from services.eval.gold import GoldQuery, Prediction
from services.eval.rank_metrics import (
    RANK_CUTOFF,
    Ties,
    hit_at,
    ndcg_at,
    precision_at,
    rank,
    recall_at,
    reciprocal_rank,
)

Target = Literal["doc", "claim"]


Visibility = Callable[[frozenset[str], str], bool]


"""``visibility(viewer_principals, id) -> bool``: may this viewer see this id?"""


DEFAULT_KS: tuple[int, ...] = (1, 5, 10)


DEFAULT_ABSTENTION_CATEGORIES: frozenset[str] = frozenset({"adversarial"})


@dataclass(frozen=True)
class QueryScore:
    """One query's scores; metric dicts are keyed by k. ``leaked`` is None when not measured."""

    qid: str
    category: str
    abstention: bool
    has_gold: bool
    n_returned: int
    hit: dict[int, float]
    recall: dict[int, float]
    precision: dict[int, float]
    rr: float
    ndcg: float
    leaked: bool | None
    leaked_ids: tuple[str, ...] = ()
    window_recall: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Metrics:
    """Macro averages over ``n`` queries."""

    n: int
    hit: dict[int, float]
    recall: dict[int, float]
    precision: dict[int, float]
    mrr: float
    ndcg: float
    cutoff: int = RANK_CUTOFF
    window_recall: dict[int, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, values in (("hit", self.hit), ("recall", self.recall), ("precision", self.precision)):
            out.update({f"{name}@{k}": v for k, v in values.items()})
        out[f"mrr@{self.cutoff}"] = self.mrr
        out[f"ndcg@{self.cutoff}"] = self.ndcg
        out.update({f"window_recall@{k}": v for k, v in self.window_recall.items()})
        return out


@dataclass(frozen=True)
class CategoryRow:
    category: str
    abstention: bool
    n_queries: int
    metrics: Metrics | None  # None when no query of the category has expected ids
    n_no_gold: int
    n_leaked: int


@dataclass(frozen=True)
class AbstentionStats:
    """Queries with no expected ids: the right answer is to return nothing."""

    n: int
    returned_nothing: int
    mean_returned: float

    @property
    def empty_rate(self) -> float | None:
        return self.returned_nothing / self.n if self.n else None


@dataclass(frozen=True)
class Report:
    target: Target
    ks: tuple[int, ...]
    cutoff: int
    n_queries: int
    overall: Metrics | None
    all_with_gold: Metrics | None
    categories: tuple[CategoryRow, ...]
    abstention: AbstentionStats
    leak_rate: float | None
    leaked_qids: tuple[str, ...]
    missing_predictions: tuple[str, ...]
    unknown_predictions: tuple[str, ...]
    per_query: tuple[QueryScore, ...] = field(default=(), repr=False)

    def to_json(self, *, per_query: bool = False, indent: int | None = 2) -> str:
        data: dict[str, Any] = asdict(self)
        if not per_query:
            data.pop("per_query")
        data["abstention"]["empty_rate"] = self.abstention.empty_rate
        return json.dumps(data, indent=indent, sort_keys=True, default=str)

    def to_table(self) -> str:
        """Plain-text table: one row per population/category, then abstention and leak lines."""
        names = [*(f"hit@{k}" for k in self.ks), *(f"R@{k}" for k in self.ks)]
        names += [*(f"P@{k}" for k in self.ks), f"MRR@{self.cutoff}", f"nDCG@{self.cutoff}"]
        rows: list[list[str]] = [["category", "n", *names, "leaks"]]
        pops = [("overall", self.overall, ""), ("all_with_gold", self.all_with_gold, "")]
        pops += [(c.category + ("*" if c.abstention else ""), c.metrics, str(c.n_leaked)) for c in self.categories]
        for label, m, leaks in pops:
            values = list(m.as_dict().values())[: len(names)] if m else []  # window recall: compare_table
            rows.append([label, str(m.n if m else 0), *(f"{v:.3f}" for v in values), leaks])
            rows[-1] += ["-"] * (len(rows[0]) - len(rows[-1]))
        lines = [f"target={self.target} queries={self.n_queries}", _grid(rows)]
        if any(c.abstention for c in self.categories):
            lines.append("* abstention category: reported on its own row, excluded from overall")
        a = self.abstention
        if a.n:
            lines.append(
                f"no expected ids (abstention): {a.n} queries, returned nothing {a.returned_nothing}/{a.n},"
                f" mean ids returned {a.mean_returned:.1f}"
            )
        lines.append(_leak_line(self))
        if self.missing_predictions:
            lines.append(f"missing predictions (scored as empty): {len(self.missing_predictions)}")
        if self.unknown_predictions:
            lines.append(f"predictions for unknown qids (ignored): {len(self.unknown_predictions)}")
        return "\n".join(lines)


def _mean_metrics(scores: Sequence[QueryScore], ks: Sequence[int], cutoff: int) -> Metrics | None:
    if not scores:
        return None
    n = len(scores)

    def avg(values: Iterable[float]) -> float:
        return sum(values) / n

    return Metrics(
        n=n,
        hit={k: avg(s.hit[k] for s in scores) for k in ks},
        recall={k: avg(s.recall[k] for s in scores) for k in ks},
        precision={k: avg(s.precision[k] for s in scores) for k in ks},
        mrr=avg(s.rr for s in scores),
        ndcg=avg(s.ndcg for s in scores),
        cutoff=cutoff,
        window_recall=(
            {k: avg(s.window_recall[k] for s in scores) for k in ks} if all(s.window_recall for s in scores) else {}
        ),
    )


def score_query(
    query: GoldQuery,
    prediction: Prediction | None,
    *,
    target: Target = "doc",
    ks: Sequence[int] = DEFAULT_KS,
    cutoff: int = RANK_CUTOFF,
    visibility: Visibility | None = None,
    abstention_categories: frozenset[str] = DEFAULT_ABSTENTION_CATEGORIES,
    ties: Ties = "given",
) -> QueryScore:
    relevant = frozenset(query.expected(target))
    ids = prediction.ids(target) if prediction else ()
    scores = prediction.scores(target) if prediction else None
    ranked = rank(ids, scores, relevant=relevant, ties=ties)
    leaked_ids: tuple[str, ...] = ()
    leaked: bool | None = None
    if visibility is not None:
        viewer = query.viewer.principals()
        leaked_ids = tuple(doc for doc in ranked if not visibility(viewer, doc))
        leaked = bool(leaked_ids)
    return QueryScore(
        qid=query.qid,
        category=query.category,
        abstention=query.category in abstention_categories,
        has_gold=bool(relevant),
        n_returned=len(ranked),
        hit={k: hit_at(ranked, relevant, k) for k in ks},
        recall={k: recall_at(ranked, relevant, k) for k in ks},
        precision={k: precision_at(ranked, relevant, k) for k in ks},
        rr=reciprocal_rank(ranked, relevant, cutoff),
        ndcg=ndcg_at(ranked, relevant, cutoff),
        leaked=leaked,
        leaked_ids=leaked_ids,
        window_recall=_window_recall(ranked, prediction, relevant, ks) if prediction else {},
    )


def _window_recall(
    ranked: Sequence[str], prediction: Prediction, relevant: frozenset[str], ks: Sequence[int]
) -> dict[int, float]:
    """Recall@k counting the windows of the top k too; {} when the prediction carries no windows."""
    if prediction.doc_windows is None:
        return {}
    window: dict[str, tuple[str, ...]] = {}
    for doc, members in zip(prediction.doc_ids, prediction.doc_windows, strict=True):
        window.setdefault(doc, members)
    out: dict[int, float] = {}
    for k in ks:
        covered = {m for doc in ranked[:k] for m in (doc, *window.get(doc, ()))}
        out[k] = len(relevant & covered) / len(relevant) if relevant else 0.0
    return out


def score(
    gold: Sequence[GoldQuery],
    predictions: Iterable[Prediction] | Mapping[str, Prediction],
    *,
    target: Target = "doc",
    ks: Sequence[int] = DEFAULT_KS,
    cutoff: int = RANK_CUTOFF,
    visibility: Visibility | None = None,
    abstention_categories: Iterable[str] = DEFAULT_ABSTENTION_CATEGORIES,
    ties: Ties = "given",
) -> Report:
    """Score predictions against gold. See the module docstring for every rule."""
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError("ks must be positive integers")
    by_qid = dict(predictions) if isinstance(predictions, Mapping) else {p.qid: p for p in predictions}
    abstain = frozenset(abstention_categories)
    gold_qids = {q.qid for q in gold}
    per_query = tuple(
        score_query(
            q,
            by_qid.get(q.qid),
            target=target,
            ks=ks,
            cutoff=cutoff,
            visibility=visibility,
            abstention_categories=abstain,
            ties=ties,
        )
        for q in gold
    )
    with_gold = [s for s in per_query if s.has_gold]
    rows = []
    for category in sorted({s.category for s in per_query}):
        members = [s for s in per_query if s.category == category]
        rows.append(
            CategoryRow(
                category=category,
                abstention=category in abstain,
                n_queries=len(members),
                metrics=_mean_metrics([s for s in members if s.has_gold], ks, cutoff),
                n_no_gold=sum(1 for s in members if not s.has_gold),
                n_leaked=sum(1 for s in members if s.leaked),
            )
        )
    no_gold = [s for s in per_query if not s.has_gold]
    leaked = tuple(s.qid for s in per_query if s.leaked)
    return Report(
        target=target,
        ks=ks,
        cutoff=cutoff,
        n_queries=len(per_query),
        overall=_mean_metrics([s for s in with_gold if not s.abstention], ks, cutoff),
        all_with_gold=_mean_metrics(with_gold, ks, cutoff),
        categories=tuple(rows),
        abstention=AbstentionStats(
            n=len(no_gold),
            returned_nothing=sum(1 for s in no_gold if s.n_returned == 0),
            mean_returned=(sum(s.n_returned for s in no_gold) / len(no_gold)) if no_gold else 0.0,
        ),
        leak_rate=(len(leaked) / len(per_query) if per_query else 0.0) if visibility is not None else None,
        leaked_qids=leaked,
        missing_predictions=tuple(q.qid for q in gold if q.qid not in by_qid),
        unknown_predictions=tuple(sorted(set(by_qid) - gold_qids)),
        per_query=per_query,
    )


def _grid(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    )


def _leak_line(report: Report) -> str:
    if report.leak_rate is None:
        return "leak rate: not measured (no visibility given)"
    n = len(report.leaked_qids)
    status = "OK" if n == 0 else "FAIL: " + ", ".join(report.leaked_qids[:10])
    return f"leak rate: {report.leak_rate:.3f} ({n}/{report.n_queries} queries) {status}"


def compare_table(
    reports: Mapping[str, Report],
    metrics: Sequence[str] = ("recall@10", "window_recall@10", "ndcg@10", "mrr@10", "hit@10"),
) -> str:
    """Arms side by side: one row per (population, metric), one column per arm, plus leak rate.

    Metric names are ``Metrics.as_dict`` keys (e.g. ``recall@5``); a metric or category an arm
    lacks shows as ``-``.
    """
    arms = list(reports)
    header = ["population", "metric", *arms]
    populations: list[str] = ["overall", "all_with_gold"]
    for r in reports.values():
        populations += [c.category for c in r.categories if c.category not in populations]

    def lookup(r: Report, population: str) -> Metrics | None:
        if population == "overall":
            return r.overall
        if population == "all_with_gold":
            return r.all_with_gold
        return next((c.metrics for c in r.categories if c.category == population), None)

    rows: list[list[str]] = [header]
    for population in populations:
        for name in metrics:
            cells = []
            for arm in arms:
                m = lookup(reports[arm], population)
                value = m.as_dict().get(name) if m else None
                cells.append("-" if value is None else f"{value:.3f}")
            rows.append([population, name, *cells])
    leak = [("-" if r.leak_rate is None else f"{r.leak_rate:.3f}") for r in reports.values()]
    rows.append(["all", "leak_rate", *leak])
    return _grid(rows)
