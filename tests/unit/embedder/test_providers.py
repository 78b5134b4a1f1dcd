from __future__ import annotations

import pytest
from pydantic import SecretStr

from embedder.hashing import HashingEmbedder
from embedder.minilm import MiniLMEmbedder
from embedder.openai_compat import OpenAICompatEmbedder
from embedder.port import Embedder
from embedder.providers import build_embedder
from services.errors import ConfigurationError


def test_builds_each_provider() -> None:
    hashing = build_embedder("hash", dim=64)
    assert isinstance(hashing, HashingEmbedder)
    assert hashing.model == "hash/v1-64"
    assert isinstance(build_embedder("local"), MiniLMEmbedder)
    vendor = build_embedder("openai", model="m", dim=8, api_key=SecretStr("k"), base_url="http://x.test/v1")
    assert isinstance(vendor, OpenAICompatEmbedder)
    assert isinstance(vendor, Embedder)
    assert vendor.model == "openai/m"


def test_unknown_provider_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="unknown embedding provider 'bert'"):
        build_embedder("bert")


def test_unknown_or_invalid_settings_fail_at_boot() -> None:
    with pytest.raises(ConfigurationError, match="colour"):
        build_embedder("hash", colour="red")
    with pytest.raises(ConfigurationError, match="dim"):
        build_embedder("hash", dim=2)
    with pytest.raises(ConfigurationError):
        build_embedder("openai", dim=8)  # model missing
