"""The SDK client's HTTP transport: one attempt of a tool or memory-verb call over HTTP (``X-Api-Key``, the
viewer's headers), its errors typed by status. A mixin of :class:`orgmem_sdk.client.OrgMemoryClient`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal, TypeVar

import httpx
from pydantic import BaseModel

from orgmem_sdk.errors import ConfigurationError, RpcTimeoutError, ServerError, error_for

M = TypeVar("M", bound=BaseModel)


class HttpTransport:
    transport: Literal["http", "kafka"]
    _http: httpx.AsyncClient | None
    _api_key: str | None

    def _http_only(self, what: str) -> None:
        if self.transport != "http":
            raise ConfigurationError(
                f"{what} is served over HTTP only; build the client with OrgMemoryClient.http(…)", setting="transport"
            )

    async def _http_call(
        self,
        method: str,
        path: str,
        req: BaseModel | None,
        model: type[M],
        principal_id: str | None,
        groups: Sequence[str] | None,
        budget: float,
    ) -> M:
        """One HTTP attempt. ``groups=None`` sends no ``X-Principal-Groups`` (the directory's groups apply)."""
        assert self._http is not None, "call start() first"
        headers = {"X-Api-Key": self._api_key or ""}
        if principal_id:
            headers["X-Principal-Id"] = principal_id
        if groups:
            headers["X-Principal-Groups"] = ",".join(groups)
        what = f"{method} {path.split('?')[0]}"
        try:
            resp = await self._http.request(
                method,
                path,
                content=None if req is None else req.model_dump_json(exclude_none=True),
                headers=headers | {"content-type": "application/json"},
                timeout=budget,
            )
        except httpx.TimeoutException as exc:
            raise RpcTimeoutError(f"{what}: no HTTP response within {budget}s") from exc
        except httpx.TransportError as exc:
            raise ServerError(f"{what}: {type(exc).__name__}: {exc}", status=503, type="ConnectionError") from exc
        if resp.status_code >= 400:
            detail = (
                resp.json().get("detail")
                if resp.headers.get("content-type", "").startswith("application/json")
                else resp.text
            )
            field = detail.get("field") if isinstance(detail, dict) else None
            retry = resp.headers.get("retry-after")
            raise error_for(resp.status_code)(
                f"{what} failed ({resp.status_code}): {json.dumps(detail)[:500]}",
                status=resp.status_code,
                type="HTTPError",
                field=field,
                retry_after_s=float(retry) if retry and retry.isdigit() else None,
            )
        return model.model_validate_json(resp.content)
