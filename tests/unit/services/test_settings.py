import pytest

from services.errors import ConfigurationError
from services.settings import load_settings


def test_missing_required_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(ConfigurationError) as err:
        load_settings(_env_file=None)
    assert "DATABASE_URL" in str(err.value) and "KAFKA_BOOTSTRAP_SERVERS" in str(err.value)


def test_s3_backend_needs_its_credentials() -> None:
    with pytest.raises(ConfigurationError, match="S3_ACCESS_KEY"):
        load_settings(
            _env_file=None,
            database_url="postgresql://x",
            kafka_bootstrap_servers="k:1",
            object_store_backend="s3",
            s3_endpoint="h:1",
            s3_secret_key="s",
        )


def test_settings_are_frozen_and_secrets_hidden() -> None:
    s = load_settings(
        _env_file=None,
        database_url="postgresql://x",
        kafka_bootstrap_servers="k:1",
        service_api_key="very-secret",
    )
    assert "very-secret" not in repr(s)
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        s.api_port = 1  # type: ignore[misc]
    assert s.topic("envelopes") == "om.envelopes.v1"
    assert s.group("ingest") == "om-ingest"


def test_api_key_required_only_when_serving_http() -> None:
    s = load_settings(_env_file=None, database_url="postgresql://x", kafka_bootstrap_servers="k:1")
    with pytest.raises(ConfigurationError, match="SERVICE_API_KEY"):
        s.require_api_key()
