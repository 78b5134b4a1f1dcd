"""The access boost's usage is decayed and frozen in evaluation (issue 26): ``chunks.access_weight`` halves every
``ACCESS_HALF_LIFE_DAYS`` and is what the ranking reads; a frozen recorder writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from retriever.access import ACCESS_HALF_LIFE_DAYS, AccessRecorder
from retriever.rows import fetch_chunks
from retriever.scope import SearchScope
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect, envelope, eventually, fetchval, principal, produce


async def test_usage_decays_and_a_frozen_recorder_records_nothing(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest")
    g = principal()
    await produce(settings, envelope("m1", "the heron count is on Saturday", principals=[g]))
    cid = str(await eventually(lambda: fetchval(settings, "SELECT id FROM chunks WHERE NOT is_parent")))
    scope = SearchScope("default", Principals((g,)))
    frozen = AccessRecorder(rt.pool, frozen=True)
    frozen.record([cid, cid])
    assert await frozen.flush() == 0
    recorder = AccessRecorder(rt.pool)
    recorder.record([cid] * 8)
    assert await recorder.flush() == 1
    conn = await connect(settings)
    try:
        assert (await fetch_chunks(conn, scope, [cid]))[cid].access_count == pytest.approx(8, rel=1e-4)
        # one half-life later the 8 accesses weigh 4; 4 more make 8, and the plain total is 12
        await conn.execute(
            "UPDATE chunks SET accessed_at = accessed_at - make_interval(days => $1) WHERE id = $2::uuid",
            int(ACCESS_HALF_LIFE_DAYS),
            cid,
        )
        assert (await fetch_chunks(conn, scope, [cid]))[cid].access_count == pytest.approx(4, rel=1e-4)
        recorder.record([cid] * 4)
        await recorder.flush()
        assert (await fetch_chunks(conn, scope, [cid]))[cid].access_count == pytest.approx(8, rel=1e-4)
        assert await conn.fetchval("SELECT access_count FROM chunks WHERE id = $1::uuid", cid) == 12
    finally:
        await conn.close()
