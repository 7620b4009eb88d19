"""Embedder and embedding texts: what costs tokens, and duplicate texts embedded once."""

from __future__ import annotations

import numpy as np
import pytest
from kb_testdata import record

from kernelkb.kb.embedder import MAX_TOKENS, Embedder
from kernelkb.retrieval.query import RetrievalQuery


def test_duplicates_share_one_vector_and_order_is_kept(embedder: Embedder) -> None:
    texts = ["fuse the epilogue", "more warps", "fuse the epilogue"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.array_equal(vectors[0], vectors[2])
    assert abs(float(vectors[0] @ vectors[1])) < 0.99
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert embedder.model.max_seq_length == MAX_TOKENS


def test_embedding_texts_leave_sql_keys_out() -> None:
    text = record(hw="A100", summary="one pass over the row", categories=("algorithm",)).\
        embedding_text()
    assert text.startswith("softmax: [algorithm] one pass over the row")
    assert "A100" not in text and "sm_80" not in text and "improved" not in text
    query = RetrievalQuery(op_type="softmax", gpu_name="NVIDIA H200", arch="sm_90",
                           feedback_text="memory bound")
    assert query.embedding_text() == "softmax: memory bound"
    assert RetrievalQuery(op_type="rope").embedding_text() == "rope"


def test_query_runner_and_batch_runner_agree(embedder: Embedder) -> None:
    """Queries run on ONNX Runtime, batches on torch (bf16 where native): same model, the
    same vectors to cosine 0.9999."""
    texts = ["softmax: [tiling] raise BLOCK_SIZE to cover a row | memory-bound",
             "attention: skip fully masked causal blocks", "x"]
    batch = embedder.embed(texts)
    queries = np.stack([embedder.embed_query(t) for t in texts])
    assert embedder.query_model is not embedder.model  # the ONNX runner, not the fallback
    assert np.all((batch * queries).sum(axis=1) > 0.9999)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, rtol=1e-5)


def test_texts_of_earlier_batches_are_not_embedded_again(embedder: Embedder) -> None:
    """An optimizer journal repeats the same edit text across runs: the second batch takes
    its vector from the cache; only the new text reaches the model."""
    embedder.clear_caches()
    first = embedder.embed(["cache test: fuse the epilogue", "cache test: more warps"])
    encoded: list[list[str]] = []
    original = embedder._encode_batch
    embedder._encode_batch = lambda texts: encoded.append(texts) or original(texts)
    try:
        second = embedder.embed(["cache test: more warps", "cache test: split the reduction"])
    finally:
        del embedder._encode_batch
    assert encoded == [["cache test: split the reduction"]]
    assert np.array_equal(second[0], first[1])
    assert float(second[1] @ first[1]) < 0.99  # the new text got its own vector


def test_the_query_runner_is_loaded_once_per_process_and_can_be_prefetched(tmp_path) -> None:
    """A CLI query starts the load on a thread while the store opens; the embedder that
    answers the query then takes the same runner, and a second embedder shares it."""
    import time

    from kernelkb.kb import embedder as embedder_mod

    embedder_mod.prefetch_query_runner(tmp_path)
    deadline = time.monotonic() + 120
    while str(tmp_path) not in embedder_mod._QUERY_MODELS and time.monotonic() < deadline:
        time.sleep(0.05)
    prefetched = embedder_mod._QUERY_MODELS[str(tmp_path)]
    first = embedder_mod.Embedder(cache_dir=tmp_path)
    second = embedder_mod.Embedder(cache_dir=tmp_path)
    assert first.query_model is prefetched and second.query_model is prefetched
    vector = first.embed_query("softmax: memory bound")
    np.testing.assert_allclose(np.linalg.norm(vector), 1.0, rtol=1e-5)


@pytest.mark.slow
def test_the_onnx_graph_is_exported_whole_into_an_empty_cache(tmp_path) -> None:
    """The export writes through kernels/shared/atomic.py: the graph appears whole, no
    temporary file stays beside it, and the runner it serves agrees with the shared one."""
    from kernelkb.kb.embedder import CACHE_DIR, model_path, query_runner
    from kernelkb.kb.onnx_minilm import OnnxMiniLM

    fresh = OnnxMiniLM(model_path(), tmp_path, MAX_TOKENS)
    assert [p.suffix for p in tmp_path.iterdir()] == [".onnx"]
    texts = ["softmax: one pass over the row", "matmul: split K"]
    np.testing.assert_allclose(fresh.encode(texts), query_runner(CACHE_DIR).encode(texts),
                               atol=1e-5)


def test_the_query_cache_drops_the_least_recently_used_text() -> None:
    """cachetools' LRUCache behind embed_query: a text asked again stays, the oldest goes."""

    embedder = Embedder(cache_size=2)
    embedder.embed_query("softmax: one pass")
    embedder.embed_query("matmul: split K")
    embedder.embed_query("softmax: one pass")  # now the most recent
    embedder.embed_query("rope: fuse sin and cos")
    assert embedder.query_counts()["cached"] == 1
    assert embedder.cached_query("softmax: one pass") is not None
    assert embedder.cached_query("matmul: split K") is None
