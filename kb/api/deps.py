"""Request dependencies: the knowledge facade built in the lifespan, and the token check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from retrieval.service import LocalKnowledge

_bearer = HTTPBearer(auto_error=False)


def get_knowledge(request: Request) -> LocalKnowledge:
    return request.app.state.knowledge


KnowledgeDep = Annotated[LocalKnowledge, Depends(get_knowledge)]


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Mutating endpoints need ``Authorization: Bearer <token>`` when a token is set."""
    expected = request.app.state.knowledge.settings.api_token
    if not expected:
        return
    if credentials is None or not secrets.compare_digest(credentials.credentials, expected):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )


TokenDep = Depends(require_token)
