"""Filesystem backend: the embedded default for a laptop. Writes are atomic (tmp file + rename)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from services.errors import ObjectStoreError


class FilesystemObjectStore:
    backend = "fs"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ObjectStoreError("object key escapes the store root", key=key)
        return path

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def put(self, key: str, data: bytes, content_type: str = "application/json") -> None:
        try:
            await asyncio.to_thread(self._put, key, data)
        except OSError as exc:
            raise ObjectStoreError("filesystem write failed", key=key, error=str(exc)) from exc

    async def get(self, key: str) -> bytes:
        try:
            return await asyncio.to_thread(self._path(key).read_bytes)
        except OSError as exc:
            raise ObjectStoreError("filesystem read failed", key=key, error=str(exc)) from exc

    async def delete(self, key: str) -> None:
        try:
            await asyncio.to_thread(self._path(key).unlink, True)
        except OSError as exc:
            raise ObjectStoreError("filesystem delete failed", key=key, error=str(exc)) from exc

    async def ping(self) -> None:
        def check() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            if not os.access(self.root, os.W_OK):
                raise OSError(f"{self.root} is not writable")

        try:
            await asyncio.to_thread(check)
        except OSError as exc:
            raise ObjectStoreError("filesystem store unusable", error=str(exc)) from exc

    async def close(self) -> None:
        return None
