-- 0005: delivery guarantees (issue 12).
-- dead_letters: one row per dead letter a stage wrote, keyed by the record's original position, so a rewound
-- batch never writes a letter twice; a letter the broker refused keeps its bytes here (published = false).
CREATE TABLE dead_letters (
    stage            text NOT NULL,
    topic            text NOT NULL,
    kafka_partition  integer NOT NULL,
    kafka_offset     bigint NOT NULL,
    record_key       bytea,
    value            bytea,            -- only when published = false
    headers          bytea NOT NULL,   -- JSON object of the letter's headers (bytea: any text survives)
    error_class      text NOT NULL,
    error_message    text NOT NULL,
    published        boolean NOT NULL,
    failed_at        timestamptz NOT NULL DEFAULT now(),
    redriven_at      timestamptz,      -- a stored letter re-produced by `orgmem dlq redrive`
    PRIMARY KEY (stage, topic, kafka_partition, kafka_offset)
);
CREATE INDEX dead_letters_stored ON dead_letters (stage, failed_at) WHERE NOT published AND redriven_at IS NULL;

-- The idempotency key of an envelope is its envelope_id: ingest keeps a digest of the content first seen
-- under an id, so the same id with different content is refused (dead letter / HTTP 409).
ALTER TABLE processed_events ADD COLUMN digest bytea;
