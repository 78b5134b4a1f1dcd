"""One frozen settings object per process, read from the environment (and ``.env``) once, at the edge.

A missing required setting stops the process at boot with a message naming the variable.
Secrets are ``SecretStr``: they never appear in reprs or logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.errors import ConfigurationError
from services.payload_errors import field_path

EmbeddingProvider = Literal["hash", "local", "bge", "openai"]
SHARED_TOPICS = frozenset({"envelopes", "rpc.retrieve"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", frozen=True, case_sensitive=False
    )

    # --- infrastructure -------------------------------------------------------------------------
    database_url: str = Field(description="Postgres DSN (pgvector required)")
    db_schema: str = Field(default="orgmem", pattern=r"^[a-z_][a-z0-9_]{0,40}$")
    db_pool_min: int = 1
    db_pool_max: int = 10
    kafka_bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    topic_namespace: str = Field(default="om", pattern=r"^[a-z][a-z0-9_\-]{0,40}$")
    group_prefix: str = Field(default="", pattern=r"^[a-z0-9_\-.]{0,60}$")
    generation: str = Field(
        default="",
        pattern=r"^[a-z0-9]{0,16}$",
        description="projection generation (set by `orgmem rebuild`, not by hand)",
    )
    topic_partitions: int = Field(default=12, ge=1, le=256)
    topic_replication_factor: int = Field(
        default=1, ge=1, le=16, description="replicas per topic partition (3 on a cluster; 1 on the single broker)"
    )
    topic_min_insync_replicas: int | None = Field(
        default=None, ge=1, le=16, description="min.insync.replicas per topic (default: 2 when replicated, else unset)"
    )
    derived_topics_fsync: bool = Field(
        default=True,
        description="fsync derived topics per append like the source of truth (off: Kafka's default flushing, faster)",
    )
    database_read_url: str | None = Field(
        default=None, description="optional DSN of a streaming replica for the retriever's and graph reads"
    )
    read_min_lsn_wait_s: float = Field(
        default=2.0, ge=0, le=30, description="bound on waiting for the replica to replay a caller's X-Min-Lsn"
    )
    object_store_backend: Literal["s3", "fs"] = "fs"
    object_store_path: Path = Path(".state/blobs")
    s3_endpoint: str | None = None
    s3_access_key: SecretStr | None = None
    s3_secret_key: SecretStr | None = None
    s3_bucket: str = "orgmem-envelopes"
    s3_secure: bool = True
    s3_region: str = "us-east-1"

    # --- HTTP API ------------------------------------------------------------------------------
    service_api_key: SecretStr | None = Field(
        default=None, description="single-key development mode: this key has every scope (logged at start-up)"
    )
    api_key_cache_s: float = Field(
        default=2.0, ge=0, le=5, description="seconds a key lookup is cached (revocation takes effect within it)"
    )
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    metrics_token: SecretStr | None = Field(default=None, description="bearer token for /metrics besides the API key")
    # /openapi.json, /docs, /redoc, /asyncapi: public, behind X-Api-Key, or not served. Unset: see api_docs_mode()
    api_docs: Literal["public", "keyed", "off"] | None = None
    # a client gets this long to send its request headers, then this long for the whole body (408, closed)
    request_header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    request_body_timeout_s: float = Field(default=15.0, gt=0, le=3600)
    # HTTP ingress waits this long for the broker's acknowledgement, then answers 503 "broker"
    ingress_produce_timeout_s: float = Field(default=3.0, gt=0, le=120)

    # --- governance ------------------------------------------------------------------------------
    retention_interval_s: float = Field(
        default=3600.0, ge=0, description="seconds between retention runs inside `orgmem up` (0 = off)"
    )
    retention_batch_size: int = Field(default=200, ge=1, le=5000)
    # per-request database time (statement_timeout) of HTTP routes; graph walks get their own budget
    # (a walk that runs out answers the deepest complete level, flagged partial) and a concurrency cap
    api_statement_timeout_ms: int = Field(default=15_000, ge=100)
    graph_walk_budget_ms: int = Field(default=4_000, ge=100)
    graph_walk_concurrency: int = Field(default=2, ge=1)
    graph_walk_queue_s: float = Field(default=10.0, gt=0)

    # --- agents (MCP, memory writes) -------------------------------------------------------------
    memory_write_cooldown_s: float = Field(default=0.0, ge=0, description="seconds between writes of a session")
    memory_write_cap: int = Field(default=200, ge=1, description="memory writes per (principal, session)")
    consolidation_enabled: bool = Field(default=False, description="scheduled memory consolidation in orgmem up")
    consolidation_interval_s: float = Field(default=86_400.0, gt=0, description="seconds between scheduled runs")
    consolidation_sim: float = Field(default=0.92, gt=0, le=1, description="cosine floor of near-duplicate memories")
    preload_top_k: int = Field(default=5, ge=1, le=20, description="memories and passages (each) a preload considers")
    mcp_allowed_hosts: str = Field(
        default="127.0.0.1:*,localhost:*,[::1]:*", description="Host header allow-list of /mcp (comma-separated)"
    )
    mcp_allowed_origins: str = Field(default="http://127.0.0.1:*,http://localhost:*,http://[::1]:*")
    mcp_tokens_path: Path | None = Field(
        default=None, description='bearer tokens of /mcp: {"<token>": {"principal_id": "user:…", "groups": [...]}}'
    )

    # --- embeddings ------------------------------------------------------------------------------
    embedding_provider: EmbeddingProvider = "bge"  # chosen by measurement: see bench/README.md
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_dim: int = Field(default=384, ge=8, le=4096)
    embed_batch_size: int = Field(default=64, ge=1, le=2048)
    # where a local model (local, bge) runs: a worker thread of the stage process (default) or its own process
    # (the other stages' Python cannot reach it through the GIL; the main module must be import-safe: spawn)
    embed_worker: Literal["process", "thread"] = "thread"
    # onnxruntime intra-op threads of the bge model (0 = one per core); see bench/README.md "Speed work"
    embed_threads: int = Field(default=0, ge=0, le=64)

    # --- stages ----------------------------------------------------------------------------------
    ingest_batch_size: int = Field(default=500, ge=1, le=10_000)
    retry_attempts: int = Field(default=5, ge=1, le=50)
    retry_base_delay_s: float = Field(default=0.2, gt=0)
    retry_max_delay_s: float = Field(default=10.0, gt=0)
    # a stage whose dependency (Postgres, object store, broker) is down re-probes with backoff capped here
    outage_max_delay_s: float = Field(default=5.0, gt=0)
    org_hierarchy_path: Path | None = None
    taxonomy_registry_path: Path | None = None

    # --- optional vendors -----------------------------------------------------------------------
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    rerank_url: str | None = None
    rerank_api_key: SecretStr | None = None
    rerank_provider: Literal["none", "http", "onnx"] = "none"
    """``onnx``: a local cross-encoder from ``rerank_model_path`` (``retriever/onnx_rerank.py``); ``http`` (or
    ``none`` with ``rerank_url`` set, as before): the vendor endpoint."""
    rerank_model_path: Path | None = None
    rerank_tokenizer_path: Path | None = None
    ranker_model_path: Path | None = None
    """A learned-ranker model built by ``orgmem ranker train`` (``retriever/learned_rank.py``); unset = today's
    fusion. Needs the ``ranker`` extra (lightgbm)."""

    # --- taxonomy write-back --------------------------------------------------------------------
    taxonomy_proposal_webhook_url: str | None = None
    taxonomy_proposal_webhook_secret: SecretStr | None = None
    taxonomy_proposal_webhook_attempts: int = Field(default=3, ge=1, le=10)

    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"

    @model_validator(mode="after")
    def _backend_credentials(self) -> Settings:
        if self.object_store_backend == "s3":
            missing = [
                name
                for name, value in (
                    ("S3_ENDPOINT", self.s3_endpoint),
                    ("S3_ACCESS_KEY", self.s3_access_key),
                    ("S3_SECRET_KEY", self.s3_secret_key),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"OBJECT_STORE_BACKEND=s3 needs {', '.join(missing)}")
        if self.embedding_provider == "openai" and not self.embedding_base_url and not self.embedding_api_key:
            raise ValueError("EMBEDDING_PROVIDER=openai needs EMBEDDING_API_KEY or EMBEDDING_BASE_URL")
        return self

    def topic(self, name: str) -> str:
        """Full topic name, e.g. ``topic("envelopes")`` -> ``om.envelopes.v1``.

        The log of record (envelopes) and the request topic are shared by every projection
        generation; the internal topics between stages belong to one generation (``om.g2.chunks.v1``).
        """
        if self.generation and name not in SHARED_TOPICS:
            return f"{self.topic_namespace}.{self.generation}.{name}.v1"
        return f"{self.topic_namespace}.{name}.v1"

    def group(self, stage: str) -> str:
        """Consumer group of a stage, e.g. ``om-ingest`` (prefixed by the rebuild generation)."""
        return f"{self.group_prefix}om-{stage}"

    def to_env(self) -> dict[str, str]:
        """These settings as environment variables (to start an ``orgmem`` child process with them)."""
        env: dict[str, str] = {}
        for name, value in self.model_dump().items():
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            env[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return env

    def api_docs_mode(self) -> Literal["public", "keyed", "off"]:
        """``API_DOCS`` when set. Unset: ``public`` in single-key development mode (``SERVICE_API_KEY`` set),
        ``keyed`` otherwise — a deployment on scoped keys is a production one."""
        if self.api_docs:
            return self.api_docs
        dev = self.service_api_key is not None and bool(self.service_api_key.get_secret_value())
        return "public" if dev else "keyed"

    def require_api_key(self) -> SecretStr:
        if self.service_api_key is None or not self.service_api_key.get_secret_value():
            raise ConfigurationError("missing required setting SERVICE_API_KEY", setting="SERVICE_API_KEY")
        return self.service_api_key


def load_settings(**overrides: object) -> Settings:
    """Build the process settings or raise ``ConfigurationError`` naming what is missing/invalid."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = field_path(err["loc"], root="").upper()
            if err["type"] == "missing":
                problems.append(f"missing required setting {loc}")
            else:
                problems.append(f"{loc or 'settings'}: {err['msg']}")
        raise ConfigurationError("; ".join(problems)) from None
