"""KernelKB: an experience base for agent-driven Triton kernel optimization.

Each root folder of the repository is one layer, and an import points down only:

- ``kernelkb/`` (this folder) is the application: the doors (``cli``, ``api``, ``mcp``,
  ``web``), ``operations`` (opening the store, matching names) and ``errors`` (one
  rendering of user errors), and ``service.LocalKnowledge``, the facade every door goes
  through;
- ``optimizer/`` (``kernelkb.optimizer``): the loop, its agents, and the sandbox that
  judges a candidate in a jailed worker;
- ``retrieval/`` (``kernelkb.retrieval``): the read side: search, ranking, few-shot
  blocks, insights, transfer, and ``protocol.Knowledge``, the seam the optimizer is typed
  against;
- ``kb/`` (``kernelkb.kb``): the store alone: the record, SQL tables, the vector index,
  the embedder, importers, settings;
- ``kernels/`` (``kernelkb.kernels``): the tasks, and in ``kernels.shared`` the floor of
  facts every layer uses (standard library only); imports only torch, triton and numpy,
  so it runs on a bare GPU host beside the sandbox;
- ``seeds/`` (``kernelkb.seeds``): the shipped experiences (package data).

The root folders hold no ``__init__.py``: each is a namespace portion of this package,
so a checkout on ``sys.path`` never shadows another distribution's top-level name
(Hugging Face's ``kernels``, which recent transformers imports, among them). A wheel
installs them inside this folder; in a checkout they lie beside it, and the path below
finds them there, so the checkout runs with no install step (a GPU host with only torch
and triton runs the sandbox's worker from it).
"""

import os as _os

_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "kernels")) and _os.path.isfile(
        _os.path.join(_checkout, "kernels", "base.py")):
    __path__.append(_checkout)  # type: ignore[name-defined]  # noqa: F821
