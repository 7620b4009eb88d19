"""KernelKB: an experience base for agent-driven Triton kernel optimization.

The project's folders are this package's subpackages, so nothing installs a top-level
name another project could own (PyPI has a ``kernels``):

- ``kernelkb.kernels``: the tasks (reference, shapes, template, space) and, in
  ``kernels.shared``, the facts and vocabulary every layer uses (standard library only);
- ``kernelkb.kb``: the store (SQL tables, the vector index, importers) and, in
  ``kb.entry``, every entry point (CLI, HTTP API, MCP server, web pages);
- ``kernelkb.retrieval``: reading the store back (search, ranking, transfer);
- ``kernelkb.optimizer``: the loop, its agents and the sandbox that judges candidates;
- ``kernelkb.seeds``: the shipped experiences (package data).

In a wheel they are installed inside this folder. In a source checkout they lie beside
it; the path below finds them there, so the checkout runs with no install step (a GPU
host with only torch and triton runs the sandbox's worker from it).
"""

import os as _os

_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "kernels")) and _os.path.isfile(
        _os.path.join(_checkout, "kernels", "__init__.py")):
    __path__.append(_checkout)  # type: ignore[name-defined]  # noqa: F821
