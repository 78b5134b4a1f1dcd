"""Object store port and its two peer backends (S3 via minio, local filesystem)."""

from services.objectstore.factory import build_object_store
from services.objectstore.port import ObjectStore

__all__ = ["ObjectStore", "build_object_store"]
