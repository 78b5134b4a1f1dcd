"""The operator console in a real browser: headless Chromium (Debian's ``chromium``, installed by ``make browser``)
driven by Playwright, against the real stack — Kafka, Postgres, S3, the API on an ephemeral port and the pipeline.

One stack and one browser for the module; the tests run in file order and share the stack's data (each one
produces what it needs, so ``-k`` works too). Screenshots of every page go to ``bench/results/console/``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.db.migrate import migrate
from services.settings import Settings
from tests.integration.agents_helpers import free_port, serve_app
from tests.integration.conftest import REPO, _teardown, make_settings
from tests.integration.helpers import envelope, eventually, fetchval, later, produce, produce_raw

CHROMIUM = os.environ.get("ORGMEM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
try:
    import playwright.async_api as pw
except ImportError:  # pragma: no cover - the dev extra installs it
    pw = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None or pw is None,
        reason="no Chromium (run `make browser`: it apt-installs Debian's chromium) or no playwright (dev extra)",
    ),
    pytest.mark.timeout(300),
]

KEY = "console-test-key"
SHOTS = REPO / "bench" / "results" / "console"
STAGES = ["ingest", "embed", "extract", "conflicts"]
TEAM = f"group:{uuid.uuid4()}"
VIEWER = f"user:{uuid.uuid4()}"
OWNER = f"user:{uuid.uuid4()}"
ADMIN = {"X-Api-Key": KEY, "X-Principal-Roles": "admin", "X-Principal-Id": f"user:{uuid.uuid4()}"}
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


class Stack:
    def __init__(self, settings: Settings, url: str, api_rt: Any) -> None:
        self.settings, self.url, self.api_rt = settings, url, api_rt
        self.pipeline: Any = None

    async def start_pipeline(self) -> None:
        from services.serve import start_runtime

        if self.pipeline is None:
            self.pipeline = await start_runtime(self.settings, STAGES, api=False)


@pytest.fixture(scope="module")
async def stack(stack_env: dict[str, str]) -> AsyncIterator[Stack]:
    """The API alone (``orgmem run api``) on an ephemeral port; the pipeline is started by the first test that
    needs it (so the pipeline page can show lag building up before anything consumes it)."""
    from services.api.app import create_app
    from services.kafka.topics import ensure_topics
    from services.serve import start_runtime, stop_runtime

    settings = make_settings(stack_env, service_api_key=KEY)
    await migrate(settings.database_url, settings.db_schema)
    await ensure_topics(settings)
    api_rt = await start_runtime(settings, [], api=True)
    s: Stack | None = None
    try:
        async with serve_app(create_app(api_rt), port=free_port(0)) as url:
            s = Stack(settings, url, api_rt)
            yield s
    finally:
        if s is not None and s.pipeline is not None:
            await stop_runtime(s.pipeline)
        await stop_runtime(api_rt)
        await _teardown(stack_env, settings)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    assert pw is not None and CHROMIUM is not None
    async with pw.async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1360, "height": 900}, color_scheme="light")
    pg = await context.new_page()
    pg.set_default_timeout(30_000)
    pg.on("dialog", lambda d: d.accept())  # the confirmations of redrive/replay
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    try:
        yield pg
    finally:
        await context.close()
    assert not errors, errors


async def open_unlocked(page: Any, stack: Stack, path: str) -> None:
    await page.goto(stack.url + path)
    await page.fill("#api-key", KEY)
    await page.click("#key-form button[type=submit]")
    await page.wait_for_selector("body.unlocked")


async def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


DATA_ROUTES = [
    ("GET", "/v1/admin/pipeline"),
    ("GET", "/v1/admin/dead-letters/ingest"),
    ("POST", "/v1/admin/dead-letters/ingest/redrive"),
    ("POST", "/v1/admin/replay"),
    ("POST", "/v1/admin/rebuild"),
    ("GET", "/v1/admin/jobs"),
    ("GET", "/v1/admin/why-not?external_id=x&query=y"),
    ("GET", "/v1/admin/console/pipeline"),
    ("GET", "/v1/admin/console/dead-letters?stage=ingest"),
    ("POST", "/v1/admin/console/redrive"),
    ("POST", "/v1/admin/console/replay"),
    ("POST", "/v1/admin/console/rebuild"),
    ("GET", "/v1/admin/console/jobs"),
    ("POST", "/v1/admin/console/playground"),
    ("POST", "/v1/admin/console/why-not"),
    ("GET", "/v1/admin/console/governance"),
    ("GET", "/v1/admin/console/who-saw?external_id=x"),
    ("GET", f"/v1/admin/console/graph?entity={uuid.uuid4()}"),
]


async def test_the_shell_renders_in_chromium_and_no_data_route_works_without_the_key(stack: Stack, page: Any) -> None:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        shell = await http.get("/console/pipeline")
        assert shell.status_code == 200 and shell.headers["content-type"].startswith("text/html")
        csp = shell.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        js = await http.get("/console/static/console.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        root = await http.get("/console")
        assert root.status_code == 307 and root.headers["location"] == "/console/pipeline"
        assert (await http.get("/console/nope")).status_code == 404
        assert (await http.get("/console/static/app.py")).status_code == 404  # only the two files are served
        for method, path in DATA_ROUTES:
            for headers in ({}, {"X-Api-Key": "wrong"}):
                r = await http.request(method, path, headers=headers, json={} if method == "POST" else None)
                assert r.status_code == 401, (method, path, headers, r.status_code)
            r = await http.request(method, path, headers={"X-Api-Key": KEY}, json={} if method == "POST" else None)
            assert r.status_code == 403, (method, path, r.status_code, r.text)  # the key without the admin role
    # the browser: locked, the page makes no data request; a wrong key is refused and forgotten
    requests: list[Any] = []
    page.on("request", lambda r: requests.append(r))
    await page.goto(stack.url + "/console/pipeline")
    assert await page.title() == "Pipeline · Org Memory console"
    await page.wait_for_timeout(500)
    assert not [r for r in requests if "/v1/" in r.url]
    await page.fill("#api-key", "not-the-key")
    await page.click("#key-form button[type=submit]")
    await page.wait_for_selector("#pipeline [role=alert]")
    assert "401" in (await page.text_content("#pipeline [role=alert]") or "")
    assert await page.evaluate("document.body.classList.contains('unlocked')") is False
    # the right key: data arrives; the key never shows in a URL, a cookie or storage
    await page.fill("#api-key", KEY)
    await page.click("#key-form button[type=submit]")
    await page.wait_for_selector("#pipeline table.stages")
    assert all(KEY not in r.url for r in requests)
    keyed = [r for r in requests if "/v1/" in r.url]
    sent = [(await r.all_headers()).get("x-api-key") for r in keyed]
    assert keyed and set(sent) <= {KEY, "not-the-key"}, sent  # every data request carries the key header
    assert await page.evaluate("document.cookie") == ""
    assert await page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert await page.input_value("#api-key") == ""


async def _lag(page: Any, stage: str) -> str:
    return (await page.text_content(f"#pipeline tr[data-stage={stage}] td.lag") or "").strip()


async def test_pipeline_page_shows_lag_building_and_draining(stack: Stack, page: Any) -> None:
    g = TEAM
    envs = [envelope(f"lag/{i}", f"status update number {i} about the launch", principals=[g]) for i in range(25)]
    await produce(stack.settings, *envs)
    await open_unlocked(page, stack, "/console/pipeline")
    # nothing consumes yet: the ingest stage's lag shows every envelope produced
    await eventually(lambda: _lag(page, "ingest"), until=lambda v: v.isdigit() and int(v) >= 25, timeout=30)
    await stack.start_pipeline()
    await eventually(lambda: _lag(page, "ingest"), until=lambda v: v == "0", timeout=90)  # refreshed by polling
    spark = await page.get_attribute("#pipeline tr[data-stage=ingest] svg.spark polyline", "points")
    assert spark and len(spark.split()) >= 2  # the sparkline kept the samples from the ring buffer
    assert "kafka" in (await page.text_content("#pipeline ul.checks") or "")
    await shot(page, "pipeline")
    await page.emulate_media(color_scheme="dark")  # the system preference picks the palette
    assert await page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    await shot(page, "pipeline-dark")
    async with httpx.AsyncClient(base_url=stack.url, headers=ADMIN, timeout=30) as http:
        status = (await http.get("/v1/admin/pipeline")).json()
    ingest = next(s for s in status["stages"] if s["stage"] == "ingest")
    assert ingest["lag"] == 0 and max(h["lag"]["ingest"] for h in status["history"]) >= 25
    assert {c["name"] for c in status["infrastructure"]} == {"postgres", "kafka", "object_store"}


async def test_a_poison_record_is_listed_escaped_and_redriven_from_the_page(stack: Stack, page: Any) -> None:
    await stack.start_pipeline()
    poison = json.dumps({"envelope_id": "not-a-uuid", "title": HOSTILE}).encode()
    await produce_raw(stack.settings, poison, key=b"poison-1")
    await open_unlocked(page, stack, "/console/dead-letters")
    letter = page.locator("article.letter", has_text="poison-1")
    for _ in range(40):
        if await letter.count():
            break
        await page.wait_for_timeout(500)  # the list polls every 4 s
    await letter.first.wait_for()
    assert "InvalidPayloadError" in (await letter.first.text_content() or "")
    await letter.first.locator("summary").click()
    payload = await letter.first.locator("pre.payload").text_content() or ""
    assert HOSTILE.replace('"', '\\"') in payload  # the hostile title as text, pretty-printed JSON
    assert await page.evaluate("window.__pwned === undefined")
    assert await page.evaluate("document.scripts.length") == 1  # only /console/static/console.js
    await shot(page, "dead-letters")
    async with httpx.AsyncClient(base_url=stack.url, headers=ADMIN, timeout=30) as http:
        listed = (await http.get("/v1/admin/dead-letters/ingest")).json()
        [item] = [i for i in listed["items"] if i["key"] == "poison-1"]
        assert item["error_class"] == "InvalidPayloadError" and json.loads(item["payload"])["title"] == HOSTILE
        assert item["original"].startswith(stack.settings.topic("envelopes") + ":")
        assert listed["classes"]["InvalidPayloadError"] >= 1
        bad = await http.post("/v1/admin/dead-letters/ingest/redrive", json={"position": "no position"})
        assert bad.status_code == 422 and "position" in bad.text
        gone = await http.post("/v1/admin/dead-letters/ingest/redrive", json={"position": "x:0:999999"})
        assert gone.status_code == 404 and "position" in gone.text
        assert (await http.get("/v1/admin/dead-letters/nosuchstage")).status_code == 404
    await letter.first.get_by_role("button", name="Redrive this one").click()
    await page.wait_for_selector("#redrive-job .job[data-state=done]", timeout=60_000)
    assert "sent=1" in (await page.text_content("#redrive-job") or "")

    # back on om.envelopes.v1, it fails again and is dead-lettered again, marked as redriven
    async def again() -> int:
        from services.ops.dlq import read_dead_letters

        letters = await read_dead_letters(stack.settings, "ingest")
        return sum(1 for x in letters if x.record.header("x-orig-x-redriven-from") and x.record.key == b"poison-1")

    assert await eventually(again, timeout=60) == 1


async def test_playground_shows_diagnostics_hides_a_private_document_and_explains_why(stack: Stack, page: Any) -> None:
    await stack.start_pipeline()
    await produce(
        stack.settings,
        envelope("pg/shared", "The quarterly roadmap review moved to Thursday.", principals=[TEAM], title="Roadmap"),
        envelope(
            "pg/private", "Quarterly roadmap: my private notes on the reorg.", principals=[OWNER], title="Private"
        ),
        envelope("pg/hostile", f"quarterly roadmap {HOSTILE}", principals=[TEAM], title=HOSTILE),
        envelope(
            "dir/priya",
            "profile",
            principals=[TEAM],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            system="directory",
            event_time=later(1),
            structured_fields={"title": "Staff Engineer"},
        ),
    )
    await eventually(
        lambda: fetchval(
            stack.settings,
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE d.external_id LIKE 'pg/%' AND c.embedding IS NOT NULL",
        ),
        until=lambda n: n >= 3,
        timeout=90,
    )
    await open_unlocked(page, stack, "/console/playground")
    await page.fill("#pg-query", "quarterly roadmap")
    await page.fill("#pg-viewer", VIEWER)
    await page.fill("#pg-groups", TEAM)
    await page.click("#pg-form button[type=submit]")
    await page.wait_for_selector("#results table.results")
    ids = await page.eval_on_selector_all(
        "#results tr[data-external-id]", "rows => rows.map(r => r.dataset.externalId)"
    )
    assert "pg/shared" in ids and "pg/private" not in ids
    results = await page.text_content("#results") or ""
    assert "fusion" in results and "Packing" in results and "#" in results  # channel ranks, fused score, packing
    assert HOSTILE in results  # the hostile title is text on the page ...
    assert await page.evaluate("window.__pwned === undefined")  # ... and nothing of it ran
    assert await page.evaluate("document.scripts.length") == 1
    await shot(page, "playground")
    await page.fill("#wn-ext", "pg/private")
    await page.get_by_role("button", name="Explain").click()
    await page.wait_for_selector("#whynot .verdict")
    assert await page.get_attribute("#whynot .verdict", "data-dropped-by") == "acl"
    assert await page.get_attribute("#whynot dd[data-visible]", "data-visible") == "no"
    assert OWNER in (await page.text_content("#whynot") or "")  # it is shared with its owner only
    async with httpx.AsyncClient(base_url=stack.url, headers=ADMIN, timeout=60) as http:
        params = {"external_id": "pg/private", "query": "quarterly roadmap", "viewer": VIEWER, "groups": TEAM}
        why = (await http.get("/v1/admin/why-not", params=params)).json()
        assert why["dropped_by"] == "acl" and why["visible"] is False and why["arms"] == []  # no search ran
        owner = (await http.get("/v1/admin/why-not", params=params | {"viewer": OWNER, "groups": ""})).json()
        assert owner["visible"] is True and owner["dropped_by"] == "returned" and owner["returned_rank"]
        bad = await http.get("/v1/admin/why-not", params=params | {"viewer": "bob"})
        assert bad.status_code == 422 and bad.json()["detail"]["field"] == "viewer"
    await page.fill("#wn-ext", "pg/shared")
    await page.get_by_role("button", name="Explain").click()
    await page.wait_for_selector("#whynot .verdict[data-dropped-by=returned]")
    assert "since" in (await page.text_content("#whynot dd[data-visible]") or "")
    await shot(page, "why-not")


async def test_governance_replay_and_graph_pages(stack: Stack, page: Any) -> None:
    await stack.start_pipeline()
    await open_unlocked(page, stack, "/console/governance")
    await page.wait_for_selector("#gov h2")
    await page.fill("#ws-ext", "pg/shared")
    await page.get_by_role("button", name="Search audits").click()
    await page.wait_for_selector("#whosaw h3")
    await shot(page, "governance")
    # replay: started from the page (POST with the key), progress until done
    await open_unlocked(page, stack, "/console/replay")
    await page.select_option("#rp-stage", "collab")
    await page.get_by_role("button", name="Start replay").click()
    await page.wait_for_selector("#job .job[data-state=done]", timeout=120_000)
    await page.wait_for_selector("#jobs td:has-text('replay')")
    await shot(page, "replay")
    async with httpx.AsyncClient(base_url=stack.url, headers=ADMIN, timeout=30) as http:
        r = await http.post("/v1/admin/replay", json={"stage": "nosuch"})
        assert r.status_code == 422 and r.json()["detail"]["field"] == "stage"
        r = await http.post("/v1/admin/replay", json={"stage": "collab", "from": "yesterday"})
        assert r.status_code == 422 and r.json()["detail"]["field"] == "from"
        jobs = (await http.get("/v1/admin/jobs")).json()
        replayed = next(j for j in jobs if j["kind"] == "replay")
        assert replayed["state"] == "done" and replayed["done"] == replayed["total"] and replayed["total"] > 0
    # graph card: a person's facts on a timeline
    person = await eventually(
        lambda: fetchval(
            stack.settings,
            "SELECT e.id FROM entities e JOIN facts f ON f.subject_id = e.id"
            " WHERE e.type = 'person' AND e.name = 'Priya Shah' AND f.predicate = 'has_title' LIMIT 1",
        ),
        timeout=60,
    )
    await produce(  # a promotion: the first title closes, the new one is open-ended
        stack.settings,
        envelope(
            "dir/priya",
            "profile",
            principals=[TEAM],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            system="directory",
            event_time=later(60 * 24 * 90),
            structured_fields={"title": "Principal Engineer"},
        ),
    )
    await eventually(
        lambda: fetchval(stack.settings, "SELECT count(*) FROM facts WHERE predicate = 'has_title'"),
        until=lambda n: n >= 2,
        timeout=60,
    )
    # the playground draws the seed's facts as a small graph (nodes and labelled edges)
    await open_unlocked(page, stack, "/console/playground")
    await page.fill("#pg-query", "what is Priya Shah's title")
    await page.fill("#pg-about", "Priya Shah")
    await page.fill("#pg-viewer", VIEWER)
    await page.fill("#pg-groups", TEAM)
    await page.click("#pg-form button[type=submit]")
    await page.wait_for_selector("#results svg.graph circle")
    labels = await page.eval_on_selector_all("#results svg.graph text", "ts => ts.map(t => t.textContent)")
    assert "Priya Shah" in labels and "has_title" in labels, labels
    await shot(page, "playground-graph")
    await open_unlocked(page, stack, "/console/graph")
    await page.fill("#gr-id", str(person))
    await page.fill("#gr-viewer", VIEWER)
    await page.fill("#gr-groups", TEAM)
    await page.get_by_role("button", name="Show card").click()
    await page.wait_for_selector("#card svg.timeline rect")
    card = await page.text_content("#card") or ""
    assert "Principal Engineer" in card
    await shot(page, "graph")


async def test_rebuild_from_the_page_switches_the_generation(stack: Stack, page: Any) -> None:
    """Last in the module: the rebuilt generation becomes the active one (torn down with the test schema)."""
    from services import generations

    await stack.start_pipeline()
    await open_unlocked(page, stack, "/console/replay")
    await page.wait_for_selector("#jobs h2")
    assert "base" in (await page.text_content("#jobs") or "")
    await page.get_by_role("button", name="Start rebuild").click()
    await page.wait_for_selector("#job .job[data-state=done]", timeout=200_000)
    assert "generation=g1" in (await page.text_content("#job") or "")
    await page.wait_for_selector("#jobs strong:text-is('g1')")  # the active generation, from the polled list
    active = await generations.resolve(stack.settings)
    assert active.generation == "g1" and active.db_schema == f"{stack.settings.db_schema}_g1"
    docs = await fetchval(active, "SELECT count(*) FROM documents")
    assert docs == await fetchval(stack.settings, "SELECT count(*) FROM documents")
