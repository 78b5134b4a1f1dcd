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
