"""``orgmem run``: one stage (the old form) or several ``--stage`` in one process; unknown names refused."""

from __future__ import annotations

from typing import Any

import pytest

from services import cli

pytestmark = pytest.mark.unit


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    async def fake_serve(settings: Any, stages: list[str], *, api: bool, host: str, port: int) -> None:
        calls.append({"stages": stages, "api": api, "port": port})

    import services.serve

    monkeypatch.setattr(services.serve, "serve", fake_serve)
    return calls


class _Settings:
    api_host = "127.0.0.1"
    api_port = 8000


async def _run(argv: list[str]) -> None:
    args = cli._parser().parse_args(argv)
    await cli.cmd_serve(_Settings(), args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "stages", "api"),
    [
        (["run", "ingest"], ["ingest"], False),
        (["run", "api"], [], True),
        (["run", "ingest", "--with-api"], ["ingest"], True),
        (["run", "--stage", "ingest"], ["ingest"], False),
        (
            ["run", "--stage", "extract", "--stage", "conflicts", "--stage", "collab"],
            ["extract", "conflicts", "collab"],
            False,
        ),
        (["run", "--stage", "api", "--stage", "retrieve", "--port", "8001"], ["retrieve"], True),
        (["run", "--stage", "embed", "--stage", "embed"], ["embed"], False),
    ],
)
async def test_run_stages(served: list[dict[str, Any]], argv: list[str], stages: list[str], api: bool) -> None:
    await _run(argv)
    assert served[-1]["stages"] == stages and served[-1]["api"] is api


@pytest.mark.parametrize("argv", [["run"], ["run", "--stage", "ingset"], ["run", "nope"]])
async def test_run_refuses_no_or_unknown_stage(served: list[dict[str, Any]], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        await _run(argv)
    assert "stage" in str(exc.value) and not served
