"""S3 backend through the ``minio`` client (any S3 API: AWS, MinIO, s3proxy, SeaweedFS, versitygw).

The minio client is synchronous; calls run in worker threads. Retries are left to the caller's
retry policy (``ObjectStoreError`` is transient), so the client itself does not retry for long.
"""

from __future__ import annotations

import asyncio
import functools
import io

import urllib3
from minio import Minio
from minio.error import S3Error

from services.errors import ObjectStoreError

PROBE_CONNECT_S = 1.0
PROBE_READ_S = 2.0


class S3ObjectStore:
    backend = "s3"

    def __init__(
        self, *, endpoint: str, access_key: str, secret_key: str, bucket: str, secure: bool, region: str
    ) -> None:
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=3.0, read=20.0),
            retries=urllib3.Retry(total=1, backoff_factor=0.1, status_forcelist=(500, 502, 503, 504)),
            maxsize=32,
        )
        self.bucket = bucket
        minio = functools.partial(
            Minio, endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region
        )
        self._client = minio(http_client=http)
        # health probes (``ping``) get their own client: no retry, short timeouts, so an outage shows at once
        self._probe = minio(
            http_client=urllib3.PoolManager(
                timeout=urllib3.Timeout(connect=PROBE_CONNECT_S, read=PROBE_READ_S), retries=False, maxsize=2
            )
        )
        self._bucket_ready = False

    async def _ensure_bucket(self) -> None:
        if self._bucket_ready:
            return
        if not await asyncio.to_thread(self._client.bucket_exists, self.bucket):
            try:
                await asyncio.to_thread(self._client.make_bucket, self.bucket)
            except S3Error as exc:
                if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
        self._bucket_ready = True

    async def put(self, key: str, data: bytes, content_type: str = "application/json") -> None:
        try:
            await self._ensure_bucket()
            await asyncio.to_thread(
                self._client.put_object, self.bucket, key, io.BytesIO(data), len(data), content_type
            )
        except (S3Error, OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            raise ObjectStoreError("S3 put failed", key=key, error=_describe(exc)) from exc

    async def get(self, key: str) -> bytes:
        def read() -> bytes:
            resp = self._client.get_object(self.bucket, key)
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()

        try:
            return await asyncio.to_thread(read)
        except (S3Error, OSError, urllib3.exceptions.HTTPError) as exc:
            raise ObjectStoreError("S3 get failed", key=key, error=_describe(exc)) from exc

    async def delete(self, key: str) -> None:
        try:
            await asyncio.to_thread(self._client.remove_object, self.bucket, key)
        except (S3Error, OSError, urllib3.exceptions.HTTPError) as exc:
            raise ObjectStoreError("S3 delete failed", key=key, error=_describe(exc)) from exc

    async def ping(self) -> None:
        """A real request to the store every time (never the cached "bucket ready"), bounded by the probe
        client's timeouts (about 3 s at most); a missing bucket is created as on first use."""
        try:
            if not await asyncio.to_thread(self._probe.bucket_exists, self.bucket):
                self._bucket_ready = False
                await self._ensure_bucket()
        except (S3Error, OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            raise ObjectStoreError("S3 unreachable or refused", error=_describe(exc)) from exc

    async def drop_bucket(self) -> None:
        """Delete every object and then the bucket itself (teardown of a throwaway namespace)."""

        def drop() -> None:
            if not self._client.bucket_exists(self.bucket):
                return
            for obj in self._client.list_objects(self.bucket, recursive=True):
                if obj.object_name is not None:
                    self._client.remove_object(self.bucket, obj.object_name)
            self._client.remove_bucket(self.bucket)

        try:
            await asyncio.to_thread(drop)
        except (S3Error, OSError, urllib3.exceptions.HTTPError) as exc:
            raise ObjectStoreError("S3 bucket drop failed", bucket=self.bucket, error=_describe(exc)) from exc

    async def close(self) -> None:
        return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, S3Error):
        return f"{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
