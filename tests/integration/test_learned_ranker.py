"""The learned ranker through the wiring: no ``RANKER_MODEL_PATH`` → today's fusion, untouched; a model file →
the full arm's candidates re-ordered by it (its version in the diagnostics), the lexical baseline untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retriever.compose import TimeAxes
from retriever.learned_rank import FEATURES
from retriever.wiring import get_service
from schemas.tools import PassageFilters
from services.eval import ranker_train
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AXES = TimeAxes(None, None, None, None, None, None, None, "none")
WORDS = ["kiln", "glaze", "clay", "wheel", "pottery", "fair", "stall", "heron", "lagoon", "ticket"]


def _reversing_model(out: Path) -> Path:
    """A model trained to prefer what the fusion ranked last (synthetic rows: the last position is relevant)."""
    data = ranker_train.TrainingSet()
    pos = FEATURES.index("inv_position")
    for q in range(60):
        rows = [[0.0] * len(FEATURES) for _ in range(6)]
        for i, row in enumerate(rows):
            row[pos] = 1.0 / (i + 1)
            row[FEATURES.index("fused")] = (6 - i + q % 3) / 10
        data.add(rows, [f"e{i}" for i in range(6)], {"e5"})
    return ranker_train.write_model(ranker_train.train(data), out, {"test": True})


async def test_ranker_absent_is_todays_ranking_present_is_used(
    settings: Settings, pipeline: Any, tmp_path: Path
) -> None:
    model = _reversing_model(tmp_path)
    with_model = settings.model_copy(update={"ranker_model_path": model})
    rt = await pipeline("ingest", "embed", settings_override=with_model)
    plain = await pipeline()
    group = principal()
    docs = [
        envelope(
            f"pottery-{i}",
            f"pottery {WORDS[i % 10]} note {i} about the {WORDS[(i * 3) % 10]} and the kiln",
            principals=[group],
            event_time=later(i),
            kind="document",
            title=f"Note {i}",
        )
        for i in range(14)
    ]
    await produce(settings, *docs)
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"),
        until=lambda n: n >= 14,
    )

    async def search(runtime: Any, arms: str) -> tuple[list[str], dict[str, Any]]:
        found = await get_service(runtime).passages.search(
            query="kiln pottery glaze",
            workspace="default",
            filters=PassageFilters(),
            limit=10,
            arms=arms,
            viewer=Principals((group,)),
            own=[group],
            axes=AXES,
            now=NOW,
        )
        return [rh.hit.chunk_id for rh in found.ranked], found.diagnostics

    assert get_service(plain).passages.learned is None
    today, diag = await search(plain, "full")
    assert len(today) >= 5 and "learned_ranker" not in diag
    again, _ = await search(plain, "full")
    assert again == today

    learned = get_service(rt).passages.learned
    assert learned is not None and model.name == f"ranker-{learned.version}.txt"
    reordered, diag = await search(rt, "full")
    assert diag["learned_ranker"] == learned.version
    assert reordered != today
    assert (await search(rt, "lexical"))[0] == (await search(plain, "lexical"))[0]
