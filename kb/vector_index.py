"""The vector index: Chroma (folder or server) for persistence, a dense matrix for queries.

Chroma holds one vector per experience, keyed by the experience id (deterministic, so an
upsert of the same record is a no-op). It is derived from SQL: ``kernelkb reindex`` wipes
and rebuilds it. Queries do not go through Chroma's ``where`` (about 59 ms p50 at 100k on
a 2-core machine): retrieval filters candidate ids in SQL and this module scores exactly
those ids against an in-memory float32 matrix loaded from Chroma once (100k x 384 =
150 MB; measured in benchmarks/kb_bench.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

from kernelkb.kb.embedder import DIMENSION
from kernelkb.kb.file_lock import file_lock
from kernelkb.kernels.shared.atomic import replaced
from kernelkb.kernels.shared.errors import UserFixable

log = logging.getLogger(__name__)

_PAGE = 5000
# Chroma persists the vectors; no query walks its HNSW graph (this module scores the SQL
# candidates exactly), so new collections build a cheap graph: 10 / 4 cost ~0.2 ms a
# vector, flat, where Chroma's 100 / 16 cost 0.4 ms at first and 2.2 ms by 16k vectors
# (CPU time on the 2-core VM; an import of ~100k sweep records spent most of its time there).
_HNSW = {"space": "cosine", "ef_construction": 10, "max_neighbors": 4}
RECHECK_S = 1.0  # how soon an id Chroma had no vector for is asked again
# a folder index's vectors as last read, for the next process (see VectorIndex._mirror)
MIRROR = "kernelkb-vectors.bin"


class IndexUnusable(UserFixable, RuntimeError):
    """The vector index's folder cannot be opened; SQL, the truth, is untouched."""


def _is_segment_name(name: str) -> bool:
    """Chroma names a segment's folder by its UUID."""
    import uuid

    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


class VectorIndex:
    def __init__(
        self,
        *,
        path: Path | None = None,
        host: str | None = None,
        port: int = 8000,
        collection: str = "experiences",
        server_writer_lock: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        if path is None and host is None:
            raise ValueError("VectorIndex needs a folder path or a Chroma server host")
        self.path = path
        self.host = host
        self.port = port
        self.collection_name = collection
        self._server_writer_lock = server_writer_lock
        self._client: Any = None
        self._collection: Any = None
        self._lock = threading.RLock()
        self._writer = threading.Lock()
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._matrix = np.zeros((0, DIMENSION), dtype=np.float32)
        self._loaded = False
        self._seen_generation = -1
        self._absent: dict[str, float] = {}  # id -> when Chroma last had no vector for it

    # -- chroma -------------------------------------------------------------------
    @property
    def collection(self) -> Any:
        with self._lock:
            if self._collection is None:
                import chromadb
                from chromadb.config import Settings as ChromaSettings

                chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
                if self.host:
                    self._client = chromadb.HttpClient(
                        host=self.host, port=self.port, settings=chroma_settings
                    )
                    self._collection = self._client.get_or_create_collection(
                        self.collection_name, configuration={"hnsw": _HNSW})
                else:
                    self._collection = self._open_folder(chromadb, chroma_settings)
            return self._collection

    def _open_folder(self, chromadb: Any, chroma_settings: Any) -> Any:
        """The folder's collection; IndexUnusable when Chroma cannot open the folder (a
        truncated or foreign chroma.sqlite3), naming the way out."""
        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._client = chromadb.PersistentClient(path=str(self.path),
                                                     settings=chroma_settings)
            return self._client.get_or_create_collection(
                self.collection_name, configuration={"hnsw": _HNSW})
        except Exception as exc:  # noqa: BLE001 - chromadb raises its own and sqlite's
            with contextlib.suppress(Exception):  # a failed open stays cached otherwise
                chromadb.api.client.SharedSystemClient.clear_system_cache()
            self._client = None
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise IndexUnusable(
                f"the vector index at {self.path} cannot be opened ({reason}); `kernelkb "
                "doctor --repair` sets it aside and rebuilds it from SQL") from exc

    def set_aside(self) -> Path | None:
        """Move an unusable folder's Chroma files into ``unreadable-<time>`` inside it (kept
        for a look, never read again), so a rebuild starts from an empty folder."""
        if self.path is None:
            return None
        self.close()
        aside = self.path / f"unreadable-{time.strftime('%Y%m%dT%H%M%S')}"
        aside.mkdir(parents=True, exist_ok=True)
        for child in list(self.path.iterdir()):
            if child.name.startswith("chroma.sqlite3") or _is_segment_name(child.name):
                child.rename(aside / child.name)
        log.warning("vector index set aside in %s; rebuilding it from SQL", aside)
        return aside

    def drop_unreferenced_segments(self) -> int:
        """Remove segment folders Chroma's catalogue no longer lists: a folder client's
        delete_collection leaves the deleted collection's vectors on disk, so each
        reindex used to add one more copy (~7 MB per 4,000 vectors). The folder client
        only; returns how many went."""
        if self.path is None or not (self.path / "chroma.sqlite3").exists():
            return 0
        import shutil
        import sqlite3

        catalogue = f"file:{self.path / 'chroma.sqlite3'}?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(catalogue, uri=True)) as db:
                live = {row[0] for row in db.execute("SELECT id FROM segments")}
        except sqlite3.Error as exc:  # another Chroma layout: leave the folder alone
            log.warning("vector index: segments not listed (%s); nothing removed", exc)
            return 0
        stale = [c for c in self.path.iterdir()
                 if c.is_dir() and _is_segment_name(c.name) and c.name not in live]
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
        return len(stale)

    def count(self) -> int:
        return int(self._reconnecting(lambda c: c.count()))

    def _reconnecting(self, call: Any) -> Any:
        """``call(collection)``, once more on a fresh handle if it fails on a Chroma
        server: another process's reindex swaps the collection (a new collection under
        the same name), and a handle to the old one fails from then on. (A folder client
        is reopened by the writer generation before writes; a read gets a fresh handle.)"""
        try:
            return call(self.collection)
        except Exception:
            with self._lock:
                self._collection = None
            return call(self.collection)

    # -- one writer at a time -----------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the folder's writer lock (an flock shared by every process on it).

        Why: two processes writing one Chroma folder through their own clients lost each
        other's vectors. Under the lock a process whose client predates another writer's
        last write reopens it first (a generation number in the folder says so), so every
        write starts from what is on disk.

        A Chroma server orders single writes, not a process's read-then-write steps: a
        repair that read the ids, then deleted as orphans the vectors another ingest wrote
        in between, lost them (rows != vectors after two ingests on PostgreSQL + a server).
        There the store's own cross-process lock (``server_writer_lock``, from kb/db.py)
        stands in for the flock."""
        if self.path is None:
            with self._writer, (self._server_writer_lock or nullcontext)():
                yield
            return
        self.path.mkdir(parents=True, exist_ok=True)
        # _writer orders this process's writers; readers only take _lock (the matrix), so
        # a long rebuild never blocks a query
        with self._writer, file_lock(self.path / ".kernelkb-writer.lock"):
            generation = self._generation()
            if self._collection is not None and generation != self._seen_generation:
                self.close()  # another process wrote since: reopen from disk
            yield
            self._seen_generation = generation + 1
            (self.path / ".kernelkb-generation").write_text(str(generation + 1))

    def _generation(self) -> int:
        assert self.path is not None
        try:
            return int((self.path / ".kernelkb-generation").read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def all_ids(self) -> set[str]:
        """Every id that has a vector (read from Chroma, not the in-memory matrix)."""
        ids: set[str] = set()
        total = self.count()
        for offset in range(0, total, _PAGE):
            ids.update(self.collection.get(include=[], limit=_PAGE, offset=offset)["ids"])
        return ids

    def missing(self, ids: Sequence[str]) -> list[str]:
        """The ids among these that have no vector."""
        if not ids:
            return []
        found = set(self._reconnecting(lambda c: c.get(ids=list(ids), include=[]))["ids"])
        return [i for i in ids if i not in found]

    def delete(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), _PAGE):
            part = list(ids[start : start + _PAGE])
            self._reconnecting(lambda c, part=part: c.delete(ids=part))
        with self._lock:
            if (self._loaded or self._ids) and ids:
                gone = set(ids)
                keep = [n for n, i in enumerate(self._ids) if i not in gone]
                self._ids = [self._ids[n] for n in keep]
                self._pos = {exp_id: n for n, exp_id in enumerate(self._ids)}
                self._matrix = self._matrix[keep]

    def upsert(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadatas: Sequence[dict[str, str | int | float | bool]] | None = None,
    ) -> None:
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids but {len(vectors)} vectors")
        for start in range(0, len(ids), _PAGE):
            end = start + _PAGE
            self._reconnecting(lambda c, start=start, end=end: c.upsert(
                ids=list(ids[start:end]),
                embeddings=np.ascontiguousarray(vectors[start:end], dtype=np.float32),
                metadatas=list(metadatas[start:end]) if metadatas else None,
            ))
        with self._lock:
            if self._loaded or self._ids:  # the whole matrix, or the part read so far
                self._add_to_matrix(ids, vectors)

    def close(self) -> None:
        """Release the Chroma client (chromadb caches one system per folder per process)."""
        with self._lock:
            if self._client is not None and hasattr(self._client, "clear_system_cache"):
                self._client.clear_system_cache()
            self._client = None
            self._collection = None

    def rebuild(self, batches: Iterable[tuple[Sequence[str], np.ndarray]]) -> int:
        """Build a new collection beside the live one, then swap it in: readers see the
        old vectors until the swap, never an empty index. A rebuild killed half-way leaves
        the live collection as it was (the half-built one is dropped by the next rebuild).
        Call inside ``writing()``. A folder Chroma cannot open is set aside first."""
        try:
            self.collection  # noqa: B018  (connects)
        except IndexUnusable as exc:
            log.warning("%s", exc)
            self.set_aside()
            self.collection  # noqa: B018  (an empty folder now)
        building = f"{self.collection_name}__rebuild"
        with contextlib.suppress(Exception):  # left over from a rebuild that was killed
            self._client.delete_collection(building)
        fresh = self._client.create_collection(building, configuration={"hnsw": _HNSW})
        done = 0
        for ids, vectors in batches:
            for start in range(0, len(ids), _PAGE):
                fresh.upsert(ids=list(ids[start : start + _PAGE]),
                             embeddings=np.ascontiguousarray(vectors[start : start + _PAGE],
                                                             dtype=np.float32))
            done += len(ids)
        with self._lock:
            self._client.delete_collection(self.collection_name)
            fresh.modify(name=self.collection_name)
            self._collection = None
            self._loaded = False
            self.drop_unreferenced_segments()
        self.ensure_loaded()
        return done

    def wipe(self) -> None:
        """Drop every vector (the first step of a rebuild): delete and recreate the
        collection, which works the same on a folder and on a Chroma server."""
        with self._lock:
            self.collection  # noqa: B018  (connects)
            self._client.delete_collection(self.collection_name)
            self._collection = None
            self.drop_unreferenced_segments()
            self._ids, self._pos = [], {}
            self._matrix = np.zeros((0, DIMENSION), dtype=np.float32)
            self._loaded = True  # empty, and kept current by upserts from now on

    # -- dense matrix -------------------------------------------------------------
    def _add_to_matrix(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        fresh = []
        for i, (exp_id, vector) in enumerate(zip(ids, vectors, strict=True)):
            row = self._pos.get(exp_id)
            if row is None:
                fresh.append(i)
            else:
                self._matrix[row] = vector
        if fresh:
            base = len(self._ids)
            self._ids.extend(ids[i] for i in fresh)
            self._pos.update((ids[i], base + n) for n, i in enumerate(fresh))
            self._matrix = np.vstack([self._matrix, vectors[fresh].astype(np.float32)])

    def ensure_loaded(self) -> None:
        """Load every vector from Chroma into memory, once."""
        if self._loaded:  # every query asks: no lock once loaded (set last, below)
            return
        with self._lock:
            if self._loaded:
                return
            ids: list[str] = []
            chunks: list[np.ndarray] = []
            total = self.count()
            for offset in range(0, total, _PAGE):
                page = self.collection.get(include=["embeddings"], limit=_PAGE, offset=offset)
                ids.extend(page["ids"])
                chunks.append(np.asarray(page["embeddings"], dtype=np.float32))
            self._ids = ids
            self._pos = {exp_id: n for n, exp_id in enumerate(ids)}
            self._matrix = (
                np.vstack(chunks) if chunks else np.zeros((0, DIMENSION), dtype=np.float32)
            )
            self._loaded = True
            log.info("vector matrix loaded: %d vectors", len(ids))

    def has(self, exp_id: str) -> bool:
        self.ensure_loaded()
        return exp_id in self._pos

    def vectors(self, ids: Sequence[str]) -> np.ndarray:
        """Vectors for ids (zeros for an id without one)."""
        self.ensure_loaded()
        out = np.zeros((len(ids), DIMENSION), dtype=np.float32)
        for n, exp_id in enumerate(ids):
            row = self._pos.get(exp_id)
            if row is not None:
                out[n] = self._matrix[row]
        return out

    def top(
        self, query: np.ndarray, candidates: Sequence[str], n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine top-n: positions into ``candidates`` (ids without a vector are
        skipped) and their scores, best first."""
        if not self._loaded:
            self._load_some(candidates)
        rows = self._rows(candidates)
        if (rows < 0).any() and self._fetch_others([candidates[int(i)]
                                                   for i in np.flatnonzero(rows < 0)]):
            rows = self._rows(candidates)
        with self._lock:
            where = np.flatnonzero(rows >= 0)
            if not len(where):
                return where, np.zeros(0, dtype=np.float32)
            rows = rows[where]
            scores = _dot(self._matrix[rows], query)
        n = min(n, len(rows))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return where[top], scores[top]


    def _load_some(self, candidates: Sequence[str]) -> None:
        """Before the whole matrix is loaded: read from Chroma the vectors of these
        candidates that the matrix lacks (the same vectors ``ensure_loaded`` would read),
        so a fresh process's first query reads a few thousand vectors, not every one
        (100k: 8 s; by id: ~0.2 s per 5,000, where paging through all cost ~0.4 s per
        5,000 on the 2-core VM). A folder index first takes what its mirror file holds
        (``_mirror``) and adds what it read from Chroma to it. An id Chroma has no vector
        for is noted as absent now (asked again after ``RECHECK_S``, as after a full
        load)."""
        with self._lock:
            wanted = [i for i in dict.fromkeys(candidates)
                      if i not in self._pos and i not in self._absent]
        if not wanted:
            return
        mirrored = self._from_mirror(wanted)
        if mirrored:
            wanted = [i for i in wanted if i not in mirrored]
            if not wanted:
                return
        now = time.monotonic()
        read = 0
        for start in range(0, len(wanted), _PAGE):
            part = wanted[start : start + _PAGE]
            page = self._reconnecting(lambda c, part=part: c.get(ids=part,
                                                                 include=["embeddings"]))
            found = list(page["ids"])
            with self._lock:
                if self._loaded:  # a full load finished meanwhile: it has them all
                    return
                if found:
                    self._add_to_matrix(found, np.asarray(page["embeddings"],
                                                          dtype=np.float32))
                    read += len(found)
                for exp_id in set(part) - set(found):
                    self._absent[exp_id] = now
        if read:
            self._to_mirror()

    # -- the mirror: a folder index's vectors as last read, for the next process -------
    # Why: every CLI query is a fresh process, and reading 30k candidates' vectors from
    # Chroma (importing chromadb, opening the folder, the reads) was 3 s of a first
    # query at 100k records. The mirror is one file in the folder: a JSON head (the
    # writer generation it was read under, the ids) and the float32 rows, written whole
    # and renamed over. It is used only under the same generation: any write to the
    # folder (an ingest, a delete, a rebuild) moves the generation, and the next read
    # goes to Chroma and writes the mirror afresh.
    def _mirror_path(self) -> Path | None:
        return None if self.path is None else self.path / MIRROR

    def _read_mirror(self) -> tuple[list[str], np.ndarray] | None:
        """The mirror's ids and rows (a read-only map), if it was written under the
        folder's current generation; None if absent, stale or unreadable."""
        path = self._mirror_path()
        if path is None or not path.exists():
            return None
        try:
            with open(path, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 0 < size < path.stat().st_size:
                    raise ValueError(f"head of {size} bytes")
                head = json.loads(f.read(size))
            if head.get("generation") != self._generation() or head.get("dim") != DIMENSION:
                return None
            ids: list[str] = head["ids"]
            return ids, np.memmap(path, dtype=np.float32, mode="r", offset=head["offset"],
                                  shape=(len(ids), DIMENSION))
        except Exception as exc:  # noqa: BLE001 - a cache: truncated, foreign, other keys
            log.debug("vector mirror %s unreadable: %s", path, exc)
            return None

    def _from_mirror(self, wanted: Sequence[str]) -> set[str]:
        """The wanted ids the mirror holds, added to the matrix."""
        mirror = self._read_mirror()
        if mirror is None:
            return set()
        ids, matrix = mirror
        row = {exp_id: n for n, exp_id in enumerate(ids)}
        hits = [i for i in wanted if i in row]
        if hits:
            vectors = np.array(matrix[[row[i] for i in hits]], dtype=np.float32)
            with self._lock:
                if not self._loaded:
                    self._add_to_matrix(hits, vectors)
        return set(hits)

    def _to_mirror(self) -> None:
        """The matrix as read so far, under the generation it was read under (written to
        a temporary file, then renamed over the mirror); a folder that cannot be written
        keeps no mirror."""
        path = self._mirror_path()
        if path is None:
            return
        generation = self._generation()
        with self._lock:
            ids, matrix = list(self._ids), np.ascontiguousarray(self._matrix, np.float32)
        earlier = self._read_mirror()  # what other queries read under this generation
        if earlier is not None:
            held = set(ids)
            keep = [n for n, exp_id in enumerate(earlier[0]) if exp_id not in held]
            if keep:
                ids += [earlier[0][n] for n in keep]
                matrix = np.vstack([matrix, np.asarray(earlier[1][keep], np.float32)])
        head = {"generation": generation, "dim": DIMENSION, "ids": ids}
        body = json.dumps(head).encode()
        offset = -(-(8 + len(body) + 64) // 64) * 64  # room for the offset itself, aligned
        head["offset"] = offset
        body = json.dumps(head).encode()
        try:
            with replaced(path) as tmp, open(tmp, "wb") as f:
                f.write(len(body).to_bytes(8, "little"))
                f.write(body)
                f.write(b"\0" * (offset - 8 - len(body)))
                f.write(matrix.tobytes())
        except OSError as exc:
            log.debug("vector mirror not written at %s: %s", path, exc)

    def _rows(self, ids: Sequence[str]) -> np.ndarray:
        """Matrix row of each id, -1 where it has none."""
        with self._lock:
            return np.fromiter(map(self._pos.get, ids, repeat(-1)), np.int64, len(ids))

    def _fetch_others(self, missing: Sequence[str]) -> bool:
        """Vectors that other processes wrote after this one loaded the matrix (the SQL
        side shows their rows at once): read them from Chroma into the matrix. Returns
        whether any arrived.

        Why: the matrix is loaded once, and this process's own upserts keep it current,
        but a `kernelkb ingest` or another service writing the same store did not reach
        it: a running server ranked their rows without similarity until restarted. An id
        still without a vector is asked again after ``RECHECK_S`` or, on a folder, when
        the writer generation moves (a row whose vector is not written yet, or never:
        `doctor --repair` gives it one). A folder client that predates another process's
        write is reopened first (chromadb's embedded client does not see it otherwise);
        that happens under this process's writer lock, and is skipped, not waited for,
        while this process writes."""
        now = time.monotonic()
        generation = self._generation() if self.path is not None else None
        moved = generation is not None and generation != self._seen_generation
        due = [i for i in missing if moved or now - self._absent.get(i, -RECHECK_S) >= RECHECK_S]
        if not due or not self._writer.acquire(blocking=False):
            return False
        try:
            if moved and self._collection is not None:
                self.close()  # reopen: the client reads what is on disk now
            if generation is not None:
                self._seen_generation = generation
            page = self._reconnecting(lambda c: c.get(ids=list(due), include=["embeddings"]))
        except Exception as exc:  # Chroma unreachable: rank these ids without similarity
            self._absent.update(dict.fromkeys(due, now))
            log.warning("vector matrix: could not read %d new vectors (%s)", len(due), exc)
            return False
        finally:
            self._writer.release()
        found = list(page["ids"])
        for exp_id in set(due) - set(found):
            self._absent[exp_id] = now
        if not found:
            return False
        with self._lock:
            self._add_to_matrix(found, np.asarray(page["embeddings"], dtype=np.float32))
        for exp_id in found:
            self._absent.pop(exp_id, None)
        log.info("vector matrix: %d vectors written by other processes loaded", len(found))
        return True


def _dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix @ query without BLAS. OpenBLAS's worker threads spin after a call and fight
    torch's OpenMP threads for the 2 cores: the next query embedding took 44-60 ms instead
    of 17 ms at 100k rows (benchmarks/results/kb_bench_cpu.md). einsum's own loop is
    single-threaded and ~1 ms for a few thousand candidates."""
    return np.einsum("ij,j->i", matrix, query)
