"""Queries that arrive together are embedded together, and get the vectors they would
have got alone (kb/embedder.py, ``_QueryBatcher``)."""

from __future__ import annotations

import threading

import numpy as np

from kernelkb.kb.embedder import Embedder


def test_concurrent_queries_share_batches_and_match_single_vectors(embedder: Embedder) -> None:
    texts = [f"softmax: bandwidth bound at {n}% of peak, rows of {2 ** (n % 12)}"
             for n in range(48)]
    alone = Embedder(cache_size=0, onnx_queries=True)
    alone._query_model = embedder.query_model  # the loaded runner, no second load
    single = np.stack([alone.query_model.encode([t])[0] for t in texts])

    together = Embedder(cache_size=0)
    together._query_model = alone.query_model
    sizes: list[int] = []
    encode = together._encode_queries

    def counted(batch: list[str]) -> np.ndarray:
        sizes.append(len(batch))
        return encode(batch)

    together._queries._encode = counted
    out: dict[int, np.ndarray] = {}
    start = threading.Barrier(12)

    def client(first: int) -> None:
        start.wait()
        for n in range(first, len(texts), 12):
            out[n] = together.embed_query(texts[n])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(sizes) == len(texts) and len(sizes) < len(texts)  # some ran as batches
    cosine = (np.stack([out[n] for n in range(len(texts))]) * single).sum(axis=1)
    assert cosine.min() > 0.9999


def test_a_failing_batch_tells_every_waiting_caller() -> None:
    embedder = Embedder(cache_size=0)

    def broken(batch: list[str]) -> np.ndarray:
        raise RuntimeError("runner gone")

    embedder._queries._encode = broken
    errors: list[str] = []

    def client() -> None:
        try:
            embedder.embed_query("x")
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == ["runner gone"] * 4
