"""Request dependencies: the knowledge facade built in the lifespan, and the token check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from kb.api.access import is_loopback, token_matches
from retrieval.service import LocalKnowledge

_bearer = HTTPBearer(auto_error=False)


def get_knowledge(request: Request) -> LocalKnowledge:
    return request.app.state.knowledge


KnowledgeDep = Annotated[LocalKnowledge, Depends(get_knowledge)]


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Mutating endpoints need ``Authorization: Bearer <token>`` when a token is set, and
    come from loopback when none is (kb/api/access.py)."""
    expected = request.app.state.knowledge.settings.api_token
    if not expected:
        if not is_loopback(request.client.host if request.client else None):
            raise HTTPException(status_code=status.HTTP_403_FORBIDDEN,
                                detail="no token is configured: writes are accepted from "
                                       "loopback only")
        return
    if credentials is None or not token_matches(credentials.credentials, expected):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


TokenDep = Depends(require_token)
