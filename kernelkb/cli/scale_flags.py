"""``--gpus`` and ``--ray``, the same on every command whose evaluations can run at once
(optimize, revalidate), and the pool they open (optimizer/eval_pool.py).

A run's verdicts and records are one card's: ``--gpus`` refuses ids of different card
models (run one command per model); on a Ray cluster the environment is read on a slot.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_scale_flags(parser: argparse.ArgumentParser, each: str) -> None:
    """``each``: what one GPU measures at a time, for the help ("a candidate")."""
    parser.add_argument("--gpus", default=None, metavar="all|N|IDS",
                        help=f"measure on several GPUs of this host at once, {each} on each "
                             "(one process per GPU, pinned by CUDA_VISIBLE_DEVICES): all, a "
                             "count N, or ids such as 0,3 (default: the first visible GPU)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help=f"measure on a Ray cluster (host:port of its head, or auto), "
                             f"{each} per GPU slot; pip install \"kernelkb[ray]\" "
                             "(docs/scale-out.md)")


def visible_gpus(text: str) -> list[str]:
    """The ids ``--gpus`` names, checked against this host (ValueError says why)."""
    import torch

    from kernelkb.optimizer.fanout import parse_gpus

    return parse_gpus(text, torch.cuda.device_count())


def open_pool(args: argparse.Namespace) -> Any:
    """The pool the flags ask for, or None (one GPU, in this process). ValueError for a
    bad ``--gpus`` or both flags; UserFixable when no cluster answers."""
    gpus, address = getattr(args, "gpus", None), getattr(args, "ray", None)
    if gpus and address:
        raise ValueError("--gpus and --ray: give one (a Ray cluster places work on its own "
                         "GPUs)")
    if address:
        from kernelkb.optimizer import ray_cluster
        from kernelkb.optimizer.eval_pool import RayPool

        return RayPool(ray_cluster.Cluster.connect(address))
    if not gpus:
        return None
    ids = visible_gpus(gpus)
    _one_card_model(ids)
    if len(ids) < 2:
        return None
    from kernelkb.optimizer.eval_pool import LocalGpus
    from kernelkb.optimizer.fanout import pinned

    return LocalGpus([pinned(i) for i in ids])


def _one_card_model(ids: list[str]) -> None:
    import torch

    names = {i: torch.cuda.get_device_name(int(i)) for i in ids}
    if len(set(names.values())) > 1:
        listed = ", ".join(f"{i}: {n}" for i, n in names.items())
        raise ValueError(f"--gpus {','.join(ids)}: different card models ({listed}); a run's "
                         "verdicts and records are one card's, so give ids of one model "
                         "and run again for the other")
