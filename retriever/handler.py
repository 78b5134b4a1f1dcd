"""Retriever RPC handler: Kafka request/reply on ``<ns>.rpc.retrieve.v1`` (wiring: ``retriever/stage.py``).

Tools: every entry of the tool catalogue (``services/api/catalogue.py``), handed in as ``tools`` — a
name -> call table the top floor builds (``catalogue.rpc_tools``), so this stage dispatches on the same
entries, validation and model-facing schemas as MCP, and a new tool is served here the day it is added.
An unknown tool is a 422 naming ``tool``. Errors are replied with their own status (``services.errors``:
403/404/422/429/502/503 …). The viewer is who the producing service says it acts for; an RPC viewer is
never an admin.

Every request is authenticated (``services.credentials.verify_rpc``): it carries an ``agent`` key's id,
a timestamp within ±5 min and an HMAC-SHA256 over the request (body, reply topic, correlation id,
deadline) with the key's RPC signing key; a request id (the correlation id) is served once (a broker
redelivery of the same record is not a replay). Unsigned, unknown or revoked key, bad signature, stale,
replayed or without the ``agent`` scope -> an error reply (401/403, the field at fault) and nothing else.
A key bound to a workspace serves that workspace only (a request naming another -> 403 ``request.workspace``).
Groups absent from the request are re-read from the directory per request.

Requests are independent: a batch runs concurrently (bounded by ``CONCURRENCY``) and every request
gets exactly one reply on its ``reply_to`` topic — a result or a structured error
(``{"ok": false, "error": {...}}``), including timeouts. A request without ``reply_to`` /
``correlation_id`` (or with a reply topic outside this namespace) is dead-lettered; one past its
``deadline`` is dropped and logged (its requester has given up). Offsets are committed after the
batch (``AckPolicy.ACK``): a crash mid-batch redelivers it and requesters ignore duplicate replies.
A new consumer group starts at ``earliest``; the 1 h topic retention and the deadline check bound
what a restarted retriever replays.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from retriever.rpc import (
    CORRELATION_ID,
    DEADLINE,
    REPLY_TO,
    deadline_ms,
    error_status,
    valid_reply_topic,
)
from retriever.rpc_auth import prune_request_ids, verify_rpc
from retriever.service import RetrieverService
from schemas.tools import RpcError, RpcReply, RpcRequest
from services.credentials import Credential, CredentialError, KeyStore
from services.directory import directory_groups
from services.errors import InvalidPayloadError, OrgMemoryError
from services.kafka.app import BrokerPublisher
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record
from services.payload_errors import first_error
from services.viewer import Viewer

log = logging.getLogger("orgmem.retriever.rpc")
CONCURRENCY = 32
REPLY_SEND_TIMEOUT_S = 10.0
PRUNE_EVERY_S = 60.0
ToolCall = Callable[[Viewer, Mapping[str, Any], str | None], Awaitable[dict[str, Any]]]
"""One tool: (viewer, the request's arguments, the credential's workspace or None) -> the JSON result; raises
``OrgMemoryError`` with its status."""


def _validation_error(exc: ValidationError, prefix: str = "") -> RpcError:
    loc, msg = first_error(exc)
    field = f"{prefix}{loc}"
    return RpcError(type="InvalidPayloadError", message=f"{field}: {msg}", status=422, field=field)


class RpcHandler:
    def __init__(
        self,
        service: RetrieverService,
        publisher: BrokerPublisher,
        dead_letters: DeadLetters,
        namespace: str,
        concurrency: int = CONCURRENCY,
        *,
        tools: Mapping[str, ToolCall],
        keys: KeyStore | None = None,
    ) -> None:
        self.service = service
        self.tools = dict(tools)
        self.keys = keys  # None: every request is refused (no credential can be verified)
        self._pruned_at = 0.0
        self.publisher = publisher
        self.dead_letters = dead_letters
        self.namespace = namespace
        self.slots = asyncio.Semaphore(concurrency)
        self.served = self.expired = 0
        self.static_members: Mapping[str, frozenset[str]] = {}  # the hierarchy file's members (directory)

    async def __call__(self, records: Sequence[Record]) -> None:
        await asyncio.gather(*(self.handle(r) for r in records))

    async def handle(self, record: Record) -> None:
        reply_to, cid = record.header(REPLY_TO), record.header(CORRELATION_ID)
        if not reply_to or not cid:
            missing = REPLY_TO if not reply_to else CORRELATION_ID
            await self.dead_letters.send(record, InvalidPayloadError(f"missing {missing} header", field=missing))
            return
        if not valid_reply_topic(self.namespace, reply_to):
            await self.dead_letters.send(
                record,
                InvalidPayloadError(
                    f"reply_to must be a {self.namespace}.rpc.reply.<client-id>.v1 topic", field=REPLY_TO
                ),
            )
            return
        now_ms = int(time.time() * 1000)
        deadline = deadline_ms(record.header(DEADLINE), record.timestamp_ms, now_ms)
        if deadline <= now_ms:
            self.expired += 1
            log.info(
                "dropping expired request %s at %s (deadline passed %d ms ago)",
                cid,
                record.position,
                now_ms - deadline,
            )
            return
        try:
            cred = await self._authenticate(record)
        except CredentialError as exc:
            log.warning("refused request %s at %s: %s (%s)", cid, record.position, exc.msg, exc.field)
            kind = "Unauthenticated" if exc.status == 401 else "Forbidden"
            error = RpcError(type=kind, message=exc.msg, status=exc.status, field=exc.field)
            await self._reply(reply_to, cid, RpcReply(ok=False, error=error))
            return
        except Exception as exc:  # the key table is unreachable: the requester may retry
            log.warning("cannot verify request %s: %s: %s", cid, type(exc).__name__, exc)
            msg = f"cannot verify the request's credential now ({type(exc).__name__})"
            error = RpcError(type="Unavailable", message=msg, status=503, field="database")
            await self._reply(reply_to, cid, RpcReply(ok=False, error=error))
            return
        async with self.slots:
            reply = await self._serve(record.value, (deadline - now_ms) / 1000, cred)
        await self._reply(reply_to, cid, reply)

    async def _authenticate(self, record: Record) -> Credential:
        if self.keys is None:
            raise CredentialError(401, "x-orgmem-key-id", "this retriever verifies no credentials", "unauthenticated")
        headers = {k: v.decode("utf-8", "replace") for k, v in record.headers}
        cred = await verify_rpc(self.keys, self.service.pool, headers, record.value, position=record.position)
        if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
            self._pruned_at = time.monotonic()
            try:
                await prune_request_ids(self.service.pool)
            except Exception as exc:  # pruning is housekeeping; the request is served
                log.warning("could not prune request ids: %s", exc)
        return cred

    async def _serve(self, body: bytes, budget_s: float, cred: Credential) -> RpcReply:
        try:
            rpc = RpcRequest.model_validate_json(body)
        except ValidationError as exc:
            return RpcReply(ok=False, error=_validation_error(exc))
        tool = self.tools.get(rpc.tool)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return RpcReply(
                ok=False,
                error=RpcError(
                    type="InvalidPayloadError", message=f"tool: unknown tool (known: {known})", status=422, field="tool"
                ),
            )
        if cred.workspace is not None:
            given = rpc.request.get("workspace", cred.workspace)
            if given != cred.workspace:
                msg = "this API key acts in another workspace"
                return RpcReply(
                    ok=False, error=RpcError(type="Forbidden", message=msg, status=403, field="request.workspace")
                )
            rpc.request.pop("workspace", None)
        pid = rpc.viewer.principal_id
        try:
            if rpc.viewer.groups is None and pid:  # no groups given: the org directory's
                groups: tuple[str, ...] = await directory_groups(self.service.pool, self.static_members, pid.lower())
            else:
                groups = tuple(rpc.viewer.groups or ())
            viewer = Viewer.of(pid, groups)  # never roles: an RPC viewer is never an admin
            result = await asyncio.wait_for(tool(viewer, rpc.request, cred.workspace), budget_s)
        except TimeoutError:
            return RpcReply(ok=False, error=RpcError(type="Timeout", message="deadline exceeded", status=504))
        except OrgMemoryError as exc:
            code, detail = error_status(exc)
            return RpcReply(
                ok=False,
                error=RpcError(
                    type=type(exc).__name__,
                    message=detail["msg"],
                    status=code,
                    field=detail.get("field"),
                    retry_after_s=exc.retry_after_s,
                ),
            )
        except Exception as exc:
            log.exception("retrieve request failed")
            return RpcReply(ok=False, error=RpcError(type=type(exc).__name__, message="internal error", status=500))
        self.served += 1
        return RpcReply(ok=True, result=result)

    async def _reply(self, topic: str, cid: str, reply: RpcReply) -> None:
        try:
            await asyncio.wait_for(
                self.publisher.send(
                    topic,
                    reply.model_dump_json(exclude_none=True).encode(),
                    key=cid.encode(),
                    headers={CORRELATION_ID: cid, "content-type": "application/json"},
                ),
                REPLY_SEND_TIMEOUT_S,
            )
        except Exception as exc:  # the requester times out and retries; never wedge the batch
            log.warning("could not reply to %s on %s: %s: %s", cid, topic, type(exc).__name__, exc)
