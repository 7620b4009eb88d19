"""The sandbox's layer tests run the layers behind the source allow-list (imports.py)
with it off: most plants import what the allow-list refuses, and each layer must still
catch them alone. The allow-list's own tests and the red-team rounds (the judge as users
get it) keep it on."""

from __future__ import annotations

import functools

import pytest

ALLOW_LIST_ON = ("test_imports", "test_redteam_judge", "test_redteam3", "test_redteam4",
                 "test_redteam5", "test_redteam6")


@pytest.fixture(autouse=True)
def _layers_behind_the_allow_list(request: pytest.FixtureRequest,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    module = request.module
    evaluate = getattr(module, "evaluate", None)
    if evaluate is None or module.__name__.rsplit(".", 1)[-1] in ALLOW_LIST_ON:
        return
    monkeypatch.setattr(module, "evaluate", functools.partial(evaluate, refuse_imports=False))
