"""Who may write: a bearer token when one is set, otherwise loopback clients only.

Why: with no token every write endpoint (``/reindex`` included) used to be open to any
host that could reach the port. Now an unset token means "this machine only", a bind to
a non-loopback address without a token is refused at start-up, and any header bytes
(non-ASCII included) are compared as bytes, so a strange token is a 401, never a 500.
"""

from __future__ import annotations

import hmac
import ipaddress

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; False for anything else or unknown."""
    if not host:
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison of any header text (Starlette decodes headers as latin-1)."""
    return hmac.compare_digest(given.encode("latin-1", "replace"),
                               expected.encode("utf-8"))


def write_policy(host: str, token: str | None) -> str:
    """The start-up line saying who may write; ValueError when the bind is unsafe."""
    if token:
        return "writes need the bearer token (KERNELKB_API_TOKEN)"
    if not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host} without a token: set KERNELKB_API_TOKEN (clients "
            "send 'Authorization: Bearer <token>' on writes) or bind to 127.0.0.1")
    return ("no KERNELKB_API_TOKEN set: writes (ingest, reindex) are accepted from "
            "loopback clients only")


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    scheme, _, token = (authorization or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def refusal(client_host: str | None, bearer: str | None,
            expected: str | None) -> tuple[int, str] | None:
    """Why a write is refused, as (HTTP status, reason), or None when it may go ahead: with
    a token set the bearer must match it; without one the client must be on loopback."""
    if not expected:
        if not is_loopback(client_host):
            return 403, "no token is configured: writes are accepted from loopback only"
        return None
    if bearer is None or not token_matches(bearer, expected):
        return 401, "missing or wrong bearer token"
    return None
