"""``orgmem eval live`` hands every flag to ``run_live`` (a dropped ``--reuse`` silently re-ingested)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

import services.eval.live as live
from services.eval.cli import add_eval_commands, cmd_eval


class _Result:
    reports: ClassVar[dict[str, Any]] = {}

    def table(self) -> str:
        return "table"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_eval_commands(parser.add_subparsers())
    return parser.parse_args(argv)


def test_live_passes_reuse_keep_and_embedder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def fake_run_live(settings: Any, dataset: Path, **kwargs: Any) -> _Result:
        seen.update(kwargs, dataset=dataset)
        return _Result()

    monkeypatch.setattr(live, "run_live", fake_run_live)
    flags = ["--reuse", "ab12cd34", "--keep", "--embedder", "bge", "--arms", "full, lexical"]
    args = _parse(
        ["eval", "live", "--dataset", str(tmp_path), *flags, "--limit-queries", "7", "--out", str(tmp_path / "o")]
    )
    assert asyncio.run(cmd_eval(None, args)) == 0  # type: ignore[arg-type]
    assert seen["reuse"] == "ab12cd34"
    assert seen["keep"] is True
    assert seen["embedder"] == "bge"
    assert seen["arms"] == ["full", "lexical"]
    assert seen["limit_queries"] == 7
    assert seen["out_dir"] == tmp_path / "o"
    assert seen["dataset"] == tmp_path


class _Overall:
    def __init__(self, recall: float) -> None:
        self.recall = recall

    def as_dict(self) -> dict[str, float]:
        return {"recall@10": self.recall}


class _Report:
    def __init__(self, recall: float, leak: float = 0.0) -> None:
        self.overall = _Overall(recall)
        self.leak_rate = leak


@pytest.mark.parametrize(
    ("recalls", "leak", "code"),
    [
        ({"full": 0.80, "lexical": 0.75, "dense": 0.70}, 0.0, 0),
        ({"full": 0.75, "lexical": 0.75, "dense": 0.70}, 0.0, 1),  # a tie does not beat
        ({"full": 0.80, "lexical": 0.70, "dense": 0.81}, 0.0, 1),
        ({"full": 0.74, "lexical": 0.70, "dense": 0.70}, 0.0, 1),  # under --min-recall 0.75
        ({"full": 0.80, "lexical": 0.75, "dense": 0.70}, 0.01, 1),  # any leak fails
    ],
)
def test_live_thresholds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, recalls: dict[str, float], leak: float, code: int
) -> None:
    result = _Result()
    monkeypatch.setattr(result, "reports", {arm: _Report(r, leak) for arm, r in recalls.items()})

    async def fake_run_live(settings: Any, dataset: Path, **kwargs: Any) -> _Result:
        return result

    monkeypatch.setattr(live, "run_live", fake_run_live)
    args = _parse(["eval", "live", "--dataset", str(tmp_path), "--min-recall", "0.75", "--beat-baselines"])
    assert asyncio.run(cmd_eval(None, args)) == code  # type: ignore[arg-type]
