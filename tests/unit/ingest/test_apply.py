import uuid
from datetime import UTC, datetime, timedelta

from ingest.apply import apply_envelope
from schemas.envelope import ChangeEnvelope

T0 = datetime(2024, 5, 8, tzinfo=UTC)
G1 = "group:11111111-1111-1111-1111-111111111111"
G2 = "group:22222222-2222-2222-2222-222222222222"
DOC = uuid.uuid4()


def env(
    op: str = "upsert",
    text: str = "v1",
    minutes: int = 0,
    principals: list[str] | None = None,
    acl_minutes: int | None = None,
) -> ChangeEnvelope:
    acl: dict[str, object] = {"principals": principals or []}
    if acl_minutes is not None:
        acl["acl_event_time"] = (T0 + timedelta(minutes=acl_minutes)).isoformat()
    body: dict[str, object] = {
        "envelope_id": str(uuid.uuid4()),
        "op": op,
        "source": {"system": "slack", "external_id": "c/1"},
        "event_time": (T0 + timedelta(minutes=minutes)).isoformat(),
        "acl": acl,
    }
    if op == "upsert":
        body["document"] = {"kind": "message", "text": text}
    return ChangeEnvelope.model_validate(body)


def run(*envs: ChangeEnvelope):  # type: ignore[no-untyped-def]
    state = None
    outs = []
    for e in envs:
        o = apply_envelope(e, state, DOC, author_person_id=None, blob_key="b")
        state = o.after
        outs.append(o)
    return state, outs


def test_new_document_without_principals_is_visible_to_nobody() -> None:
    state, _ = run(env())
    assert state is not None and state.principals == () and state.current_version == 1


def test_older_content_never_overwrites_newer() -> None:
    state, outs = run(env(text="new", minutes=10, principals=[G1]), env(text="old", minutes=0, principals=[G1]))
    assert state is not None and state.current_version == 1 and not outs[1].content_changed


def test_same_content_newer_event_is_no_new_version() -> None:
    state, outs = run(env(text="same", minutes=0), env(text="same", minutes=5))
    assert state is not None and state.current_version == 1 and not outs[1].content_changed


def test_delete_then_older_upsert_stays_deleted_newer_upsert_revives() -> None:
    state, _ = run(env(text="a", minutes=0), env(op="delete", minutes=10), env(text="b", minutes=5))
    assert state is not None and state.deleted_at == T0 + timedelta(minutes=10)
    state2, outs = run(env(text="a", minutes=0), env(op="delete", minutes=10), env(text="c", minutes=20))
    assert state2 is not None and state2.deleted_at is None and state2.current_version == 2 and outs[2].content_changed


def test_acl_last_writer_wins_on_acl_event_time() -> None:
    state, outs = run(env(principals=[G1], acl_minutes=10), env(op="acl", principals=[G2], acl_minutes=5))
    assert state is not None and state.principals == (G1,) and not outs[1].acl_changed
    state, outs = run(env(principals=[G1], acl_minutes=10), env(op="acl", principals=[G2], acl_minutes=15))
    assert state is not None and state.principals == (G2,) and outs[1].acl_changed and not outs[1].content_changed


def test_acl_before_any_content_is_kept_for_the_later_upsert() -> None:
    state, _ = run(env(op="acl", principals=[G2], minutes=50), env(text="x", minutes=0))
    assert state is not None and state.principals == (G2,) and state.current_version == 1


def test_a_message_title_that_repeats_its_thread_id_is_not_its_index_title() -> None:
    def titled(kind: str, title: str | None, thread: str | None, author: str | None = None) -> ChangeEnvelope:
        body = env().model_dump(mode="json")
        body["document"] |= {"kind": kind, "title": title, "thread_external_id": thread}
        if author:
            body["author"] = {"display_name": author}
        return ChangeEnvelope.model_validate(body)

    def state(e: ChangeEnvelope):  # type: ignore[no-untyped-def]
        return apply_envelope(e, None, DOC, author_person_id=None, blob_key="b").after

    assert state(titled("message", "conv-26/session_1", "conv-26/session_1")).index_title is None
    assert state(titled("message", "#design-review", "conv-26/session_1")).index_title == "#design-review"
    assert state(titled("document", "conv-26/session_1", "conv-26/session_1")).index_title == "conv-26/session_1"
    assert state(titled("message", None, "t")).index_title is None
    s = state(titled("message", "t", "t", author="Caroline"))
    assert s.title == "t" and s.author_name == "Caroline" and s.author_person_id is None  # stored as sent
