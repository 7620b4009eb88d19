"""The store, and in ``entry`` every door into it.

The store: the experience record (``record``), the SQL tables that are the source of
truth (``models``, ``db``, ``queries``, ``ingest``), the derived vector index
(``vector_index``, ``embedder``), importers of other tools' tuning data (``importers``),
the shipped seeds (``seeds``), settings. ``service.LocalKnowledge`` is the facade every
read and write goes through: it stands above ``retrieval``, which reads the store back.

``entry``: the CLI, the HTTP API, the MCP server and the web pages, on one operations
layer (``entry.operations``) and one rendering of user errors (``entry.errors``).
"""
