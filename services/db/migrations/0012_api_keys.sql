-- 0012: scoped API keys (services/credentials.py). One row per key; the secret itself is never stored:
-- `secret_sha256` (hex SHA-256 of the whole key, which carries 256 random bits, so a plain hash is enough)
-- authenticates HTTP and MCP callers; `rpc_verifier` (HMAC-SHA256(key, "orgmem-rpc-signing/v1"), derived by
-- the client from the key it holds) verifies the HMAC of a Kafka request. `scopes` are what the key may do
-- (ingest, directory, agent, admin); `workspace` (NULL = any) is the one workspace the key acts in.
-- Revoking sets `revoked_at`; rows are never deleted (ids stay unique and auditable).
CREATE TABLE api_keys (
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    secret_sha256 text NOT NULL UNIQUE CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
    rpc_verifier bytea NOT NULL CHECK (length(rpc_verifier) = 32),
    scopes text[] NOT NULL CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['ingest', 'directory', 'agent', 'admin']),
    workspace text CHECK (workspace ~ '^[A-Za-z0-9_.\-]{1,64}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

-- Replay protection of signed Kafka requests: a (key, request id) is served once. `position`
-- (topic:partition:offset) tells a broker redelivery of the same record (served again) from a replay of its
-- bytes in a new record (refused). Rows older than the signature window are pruned by the retriever.
CREATE TABLE rpc_request_ids (
    key_id text NOT NULL,
    request_id text NOT NULL,
    position text NOT NULL,
    seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_id, request_id)
);
CREATE INDEX rpc_request_ids_seen_at ON rpc_request_ids (seen_at);
