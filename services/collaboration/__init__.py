"""Collaboration stage (group ``om-collab`` on ``om.documents.v1``): person↔person edges with counts,
last-seen and decayed weights. Pure rules live in ``weights``."""
