"""Scoped API keys, pure parts: key format, scopes, the RPC signature, the workspace binding, dev mode."""

from __future__ import annotations

import hashlib
import hmac
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from retriever.rpc import rpc_message, sign_rpc
from schemas.tools import SearchKnowledgeBaseRequest
from services import credentials
from services.api.app import key_store
from services.credentials import DEV_CREDENTIAL, CredentialError, KeyStore, bind_workspace
from services.settings import load_settings


def test_new_keys_are_unique_and_carry_their_public_id() -> None:
    made = {credentials.new_key() for _ in range(50)}
    assert len({k for _, k in made}) == 50
    for kid, key in made:
        assert credentials.KEY_RE.match(key) and credentials.key_id_of(key) == kid
    assert credentials.key_id_of("any-service-api-key") == credentials.DEV_KEY_ID


def test_scopes_are_checked() -> None:
    assert credentials.check_scopes(["admin", "agent", "agent"]) == ["agent", "admin"]
    for bad in ([], ["root"], ["agent", "Agent"]):
        with pytest.raises(ValueError, match="scopes"):
            credentials.check_scopes(bad)


def test_signature_covers_every_steering_header_and_the_body() -> None:
    key = credentials.new_key()[1]
    h = dict(sign_rpc(key, request_id="r1", reply_to="om.rpc.reply.c.v1", deadline="5", body=b"{}", now_ms=1000))
    assert h["x-orgmem-key-id"] == credentials.key_id_of(key).encode() and h["x-orgmem-timestamp"] == b"1000"
    verifier = credentials.rpc_signing_key(key)
    good = rpc_message(credentials.key_id_of(key), "1000", "r1", "om.rpc.reply.c.v1", "5", b"{}")
    assert hmac.new(verifier, good, hashlib.sha256).hexdigest().encode() == h["x-orgmem-signature"]
    for changed in (
        rpc_message(credentials.key_id_of(key), "1001", "r1", "om.rpc.reply.c.v1", "5", b"{}"),
        rpc_message(credentials.key_id_of(key), "1000", "r2", "om.rpc.reply.c.v1", "5", b"{}"),
        rpc_message(credentials.key_id_of(key), "1000", "r1", "om.rpc.reply.x.v1", "5", b"{}"),
        rpc_message(credentials.key_id_of(key), "1000", "r1", "om.rpc.reply.c.v1", "6", b"{}"),
        rpc_message(credentials.key_id_of(key), "1000", "r1", "om.rpc.reply.c.v1", "5", b"[]"),
    ):
        assert hmac.new(verifier, changed, hashlib.sha256).hexdigest().encode() != h["x-orgmem-signature"]
    # the verifier is not the key and not its lookup hash
    assert verifier != key.encode() and verifier.hex() != credentials.secret_sha256(key)


def test_bind_workspace() -> None:
    req = SearchKnowledgeBaseRequest(query="q")
    assert bind_workspace(req, None) is req
    assert bind_workspace(req, "ws1").workspace == "ws1"  # not given: the key's
    assert bind_workspace(SearchKnowledgeBaseRequest(query="q", workspace="ws1"), "ws1").workspace == "ws1"
    with pytest.raises(CredentialError) as exc:
        bind_workspace(SearchKnowledgeBaseRequest(query="q", workspace="default"), "ws1")
    assert (exc.value.status, exc.value.field, exc.value.kind) == (403, "workspace", "wrong_workspace")


async def test_dev_key_has_every_scope_and_is_logged(caplog: Any) -> None:
    store = KeyStore(lambda: None, "dev-secret")
    assert await store.authenticate("dev-secret") is DEV_CREDENTIAL
    assert all(DEV_CREDENTIAL.has(s) for s in credentials.SCOPES)
    assert await store.authenticate("dev-secret ") is None and await store.authenticate(None) is None
    found = await store.verifier("dev")
    assert found is not None and found[1] == credentials.rpc_signing_key("dev-secret")
    assert await KeyStore(lambda: None, None).verifier("dev") is None
    s = load_settings(
        _env_file=None, database_url="postgresql://x/y", kafka_bootstrap_servers="k:1", service_api_key="k"
    )
    caplog.set_level(logging.INFO, logger="orgmem.api")
    key_store(lambda: SimpleNamespace(settings=s, pool=None))  # type: ignore[arg-type,return-value]
    assert [r.levelname for r in caplog.records if "single-key development mode" in r.message] == ["WARNING"]
