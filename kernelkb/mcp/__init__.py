"""The MCP server (``kernelkb mcp``): KernelKB as memory and judge for coding agents.

An entry module, like the CLI and the HTTP API: it may import retrieval and the optimizer;
nothing imports it. Tools and resources are in ``tools.py`` and ``tasks.py``, the server
in ``server.py``, the token gate of the HTTP transport in ``http.py``.
"""
