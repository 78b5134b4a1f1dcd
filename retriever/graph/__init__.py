"""The graph's read side, in one place: the viewer-scoped SQL (``reads``: entities, facts, diffs, bounded
path walks, relational evidence; ``temporal``: the bi-temporal and all-visible ACL builders), the cards and
Worldbuilder profiles built on it (``cards``, ``projects``, ``profile_*``, ``worldbuilder``), and
``retrieve_context``'s graph channel (``channel``, with its relationship-question parser
``relational_query``). ACL and temporal filters are applied in SQL, so nothing here can widen what a
viewer sees. The HTTP graph tools (``services/api/graph.py``) call the same reads."""
