"""The tasks: what is being optimized, and the floor every layer stands on.

A task (``base.Task``) is an op's PyTorch reference, its shapes and regimes, its starting
Triton kernel (``templates/``), its knobs and variants, and the peers it is timed
against. ``discovery`` holds the registry (``get_task``, ``all_tasks``) and finds the
tasks of this package, of users' folders and of entry points; ``conditions``,
``scalar_args``, ``regimes``, ``config`` (a candidate's header) and ``dtypes`` are what a
task is built from, and none of them imports ``base``. ``shared`` holds the facts and
vocabulary with one copy each (GPU table, edit categories, verdicts, dtype names, hashes,
geomean, launch facts), standard library only.

Imports only torch, triton and numpy: it runs on a bare GPU host, beside the sandbox.
"""
