"""The frozen bf16 graph (kb/embedder.py ``_Frozen``): traced on one batch shape, it must
give the fp32 model's vectors on others (batch sizes, lengths, truncation)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelkb.kb.embedder import Embedder


def test_frozen_graph_matches_fp32_on_other_shapes(embedder: Embedder) -> None:
    if not embedder.bf16:
        pytest.skip("no native bf16 here: batches run eager fp32")
    assert embedder._frozen is not None  # traced and checked, not the eager fallback
    texts = ["x", "rope: [memory] fuse the cos/sin load | latency-bound",
             "softmax: [tiling] one pass over the row " * 3,
             "matmul: [pipelining] num_stages 3 -> 4 " * 40]  # past MAX_TOKENS: truncated
    fp32 = Embedder(bf16=False, onnx_queries=False)
    reference = fp32.embed(texts)
    for batch_size in (1, 3, 32):
        embedder.batch_size = batch_size
        embedder.clear_caches()  # or the second pass would read the first one's vectors
        try:
            vectors = embedder.embed(texts)
        finally:
            embedder.batch_size = 32
        assert np.all((vectors * reference).sum(axis=1) >= 0.9999), batch_size
