"""The extractor stage's pure logic: text → registry-bound entities, claims and relationships.

- ``patterns``: zero-LLM typed verb patterns + bare named-phrase mentions (the default path).
- ``mentions``: HERB-style ``@eid_…`` person mentions, meeting rosters/speakers, PR reviews.
- ``structured``: registry-bound ``structured_fields`` → person ground-truth claims.
- ``windows``: overlapping windows for long documents.
- ``llm_schema``: JSON-schema response format and output parsing for optional LLM extraction.
- ``links`` / ``names`` / ``rules``: shared output types, name-shape rules, the pattern table.

No module here performs I/O.
"""
