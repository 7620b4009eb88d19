"""The HTTP service (FastAPI). An entry module: it may import retrieval; nothing imports it."""
