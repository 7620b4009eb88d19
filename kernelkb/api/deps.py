"""Request dependencies: the knowledge facade built in the lifespan, and the token check."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from kernelkb.api.access import refusal
from kernelkb.service import LocalKnowledge

_bearer = HTTPBearer(auto_error=False)


def get_knowledge(request: Request) -> LocalKnowledge:
    return request.app.state.knowledge


KnowledgeDep = Annotated[LocalKnowledge, Depends(get_knowledge)]


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Mutating endpoints need ``Authorization: Bearer <token>`` when a token is set, and
    come from loopback when none is (kernelkb/api/access.py)."""
    refused = refusal(request.client.host if request.client else None,
                      credentials.credentials if credentials else None,
                      request.app.state.knowledge.settings.api_token)
    if refused is None:
        return
    code, detail = refused
    raise HTTPException(status_code=code, detail=detail,
                        headers={"WWW-Authenticate": "Bearer"} if code == 401 else None)


TokenDep = Depends(require_token)
