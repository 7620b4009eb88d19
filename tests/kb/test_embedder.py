"""Embedder and embedding texts: what costs tokens, and duplicate texts embedded once."""

from __future__ import annotations

import numpy as np
from kb_testdata import record, shared_embedder

from kb.embedder import MAX_TOKENS
from retrieval.query import RetrievalQuery


def test_duplicates_share_one_vector_and_order_is_kept() -> None:
    embedder = shared_embedder()
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
