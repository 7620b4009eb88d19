"""The content hash of a kernel source: the key of the store's kernels table, a record's
parent and child hashes, the loop's and the agents' "tried already" sets and the sandbox's
result all use this one function, so one source has one key everywhere."""

from __future__ import annotations

import hashlib


def source_hash(source: str) -> str:
    """sha256 of the source's UTF-8 text, its first 16 hex digits."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]
