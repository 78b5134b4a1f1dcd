"""Memory consolidation (seed 002, corrected): exact and near-duplicate memories and contradicted statements are
merged by *superseding*, never deleting — absorbed memories stop ranking but stay stored and readable, every merge
is recorded and can be undone exactly. ``rules`` is the pure planning core, ``repository`` the SQL, ``run`` the
orchestration used by ``orgmem consolidate``, the schedule in ``orgmem up`` and the HTTP routes."""
