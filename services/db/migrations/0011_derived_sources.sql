-- 0011: derived data inherits the ACL of everything it came from (issue 20 §2).
--
-- An identity alias (email, platform user id, phone handle, ...) is derived from the documents that carried
-- it: the envelopes whose author / participants named the key (ingest) and the documents an extracted person
-- identity came from (conflicts stage). `person_alias_sources` records them; reads show or resolve an alias
-- only to a viewer who sees all of its live sources (services/sources.py), and retention deletes an alias
-- whose last source is purged. An ingest re-version replaces its document's rows (as participants).
CREATE TABLE person_alias_sources (
    workspace    text NOT NULL,
    namespace    text NOT NULL,
    value        text NOT NULL,
    document_id  uuid NOT NULL REFERENCES documents (id),
    PRIMARY KEY (workspace, namespace, value, document_id),
    FOREIGN KEY (workspace, namespace, value) REFERENCES person_aliases (workspace, namespace, value)
        ON DELETE CASCADE
);
CREATE INDEX person_alias_sources_document ON person_alias_sources (document_id);

-- Existing aliases: every document their person took part in (author, participant) or was named in. Wider
-- than the documents that carried the key, so the backfill can only hide an alias from more viewers, never
-- show it to one who could not see where it came from.
INSERT INTO person_alias_sources (workspace, namespace, value, document_id)
SELECT a.workspace, a.namespace, a.value, p.document_id
FROM person_aliases a JOIN participants p ON p.person_id = a.person_id
UNION
SELECT a.workspace, a.namespace, a.value, ee.document_id
FROM person_aliases a JOIN entity_evidence ee ON ee.entity_id = a.person_id
ON CONFLICT DO NOTHING;
