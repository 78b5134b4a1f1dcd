"""Build the configured object store backend from settings."""

from __future__ import annotations

from services.objectstore.fs import FilesystemObjectStore
from services.objectstore.port import ObjectStore
from services.objectstore.s3 import S3ObjectStore
from services.settings import Settings


def build_object_store(settings: Settings) -> ObjectStore:
    if settings.object_store_backend == "s3":
        assert settings.s3_endpoint and settings.s3_access_key and settings.s3_secret_key  # settings validated
        return S3ObjectStore(
            endpoint=settings.s3_endpoint,
            access_key=settings.s3_access_key.get_secret_value(),
            secret_key=settings.s3_secret_key.get_secret_value(),
            bucket=settings.s3_bucket,
            secure=settings.s3_secure,
            region=settings.s3_region,
        )
    return FilesystemObjectStore(settings.object_store_path)
