"""HTTP API (FastAPI): health, metrics, AsyncAPI, ingress, agent tools, graph cards, admin."""
