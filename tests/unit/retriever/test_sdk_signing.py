"""The SDK's request signing and the server's are one algorithm: shared vectors, and the server's verifier
accepts what the SDK signs."""

from __future__ import annotations

import pytest

from orgmem_sdk.signing import key_id_of as sdk_key_id
from orgmem_sdk.signing import sign_rpc as sdk_sign
from retriever.rpc import sign_rpc as server_sign
from services.credentials import key_id_of

pytestmark = pytest.mark.unit

VECTORS = [
    ("omk_0123456789ab." + "s" * 43, "req-1", "om.rpc.reply.c1.v1", "1700000000000", b'{"tool":"retrieve_context"}'),
    ("a-development-key", "req-2", "om.rpc.reply.c2.v1", "1", b""),
]


@pytest.mark.parametrize(("key", "rid", "reply_to", "deadline", "body"), VECTORS)
def test_sdk_and_server_sign_the_same_bytes(key: str, rid: str, reply_to: str, deadline: str, body: bytes) -> None:
    kwargs = {"request_id": rid, "reply_to": reply_to, "deadline": deadline, "body": body, "now_ms": 1_700_000_000_123}
    assert sdk_sign(key, **kwargs) == server_sign(key, **kwargs)  # type: ignore[arg-type]
    assert sdk_key_id(key) == key_id_of(key)


def test_a_changed_byte_changes_the_signature() -> None:
    a = sdk_sign("k" * 30, request_id="r", reply_to="t", deadline="1", body=b"x", now_ms=5)
    b = sdk_sign("k" * 30, request_id="r", reply_to="t", deadline="1", body=b"y", now_ms=5)
    assert a[2] != b[2] and a[:2] == b[:2]
