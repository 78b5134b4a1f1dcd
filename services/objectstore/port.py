"""The ``ObjectStore`` port. Raw envelope bytes are archived here after Postgres accepts them."""

from __future__ import annotations

from typing import Protocol


class ObjectStore(Protocol):
    backend: str

    async def put(self, key: str, data: bytes, content_type: str = "application/json") -> None:
        """Store ``data`` at ``key`` (overwrite). Raises ``ObjectStoreError`` on failure."""

    async def get(self, key: str) -> bytes:
        """Return the bytes at ``key``. Raises ``ObjectStoreError`` if missing or unreachable."""

    async def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key is not an error."""

    async def ping(self) -> None:
        """Raise ``ObjectStoreError`` unless the store is reachable and usable."""

    async def close(self) -> None: ...
