"""``kernelkb optimize TASK``: the CLI face of ``optimizer.session.optimize``.

Light at import (argparse only) so ``kernelkb --help`` stays instant. Live progress is
one log line per round on the ``kernelkb.progress`` logger, and on a terminal a spinner
with the current round and best time (kb/terminal.py).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from kernelkb.cli.common import TASK_HELP, Command
from kernelkb.cli.model_flags import add_model_flags, run_shapes
from kernelkb.cli.scale_flags import add_scale_flags, open_pool

HELP = "optimize a task's kernel with an agent, writing experiences back"
progress = logging.getLogger("kernelkb.progress")
GPU_MAX_ITERS = 100
CPU_MAX_ITERS = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", nargs="?", metavar="TASK",
                        help=f"{TASK_HELP}; with --resume: the run's own")
    parser.add_argument("--resume", metavar="RUN", default=None,
                        help="go on with an interrupted run (its id under the runs folder, or "
                             "its folder) from its journal and stored records: finished "
                             "regimes stay, the one it stopped in continues from its best "
                             "kernel, with the rounds it used taken off --max-iters")
    tasks_dir_flag(parser)
    parser.add_argument("--agent", choices=("offline", "llm", "tuner"), default="offline",
                        help="offline catalog agent (default), an LLM, or the knob tuner")
    parser.add_argument("--search", choices=("grid", "tpe"), default="grid",
                        help="tuner agent: grid or TPE-like search over the knobs")
    parser.add_argument("--max-iters", type=int, default=None,
                        help=f"rounds at most (default {GPU_MAX_ITERS} on a GPU; "
                             f"{CPU_MAX_ITERS} on a CPU, where nothing is timed: a short "
                             "check of the loop)")
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="every module's log lines (each evaluation's steps, retrieval, "
                             "seeding), not only a line a round and the summary")
    parser.add_argument("--keep-untimed", action="store_true",
                        help="on a CPU, store the run's untimed rounds as experiences too "
                             "(default: they go to the run's journal only)")
    parser.add_argument("--patience", type=int, default=6,
                        help="stop after this many rounds without a new best")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop after this many seconds of evaluation (GPU) time")
    parser.add_argument("--target-speedup", type=float, default=None,
                        help="stop once the best is this much faster than the start")
    parser.add_argument("--explore-every", type=int, default=10,
                        help="every Nth round is an exploration round (a structurally "
                             "different candidate)")
    parser.add_argument("--no-peers", action="store_true",
                        help="skip timing eager / torch.compile / Liger at the end (GPU only)")
    parser.add_argument("--no-retrieval", action="store_true",
                        help="do not retrieve experiences (still writes them back)")
    parser.add_argument("--dtype", default="float16", help="dtype the kernel runs in")
    parser.add_argument("--shapes", default="auto",
                        help="shape set per round: auto, cpu, sweep, edge, all; or shapes "
                             "to tune on, sizes joined by x (e.g. 1x4096,2048x4096), used "
                             "for the rounds and the sweep")
    add_model_flags(parser)
    parser.add_argument("--sweep-shapes", default="auto",
                        help="shape set of the final sweep: auto (every shape on a GPU; the "
                             "cpu and edge shapes on a CPU), cpu, sweep, edge, all")
    parser.add_argument("--regime", action="append", default=[], metavar="NAME",
                        help="tune only this shape regime (repeatable; `kernelkb dispatch "
                             "regimes` lists them); merge the tables of separate runs with "
                             "`kernelkb dispatch merge`")
    parser.add_argument("--seeds", type=int, default=3,
                        help="random inputs each candidate is checked on, per shape")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="seconds one candidate's evaluation may take")
    parser.add_argument("--out", type=Path, default=None,
                        help="runs folder (default: KERNELKB_RUNS_DIR, else runs/ in the "
                             "store's home)")
    parser.add_argument("--journal", type=Path, default=None,
                        help="journal path when the service is down (default: in the run)")
    parser.add_argument("--model", default=None, help="LLM model (else KERNELKB_LLM_MODEL)")
    parser.add_argument("--base-url", default=None, metavar="URL",
                        help="OpenAI-compatible endpoint of --agent llm, e.g. vLLM "
                             "http://localhost:8000/v1 or Ollama http://localhost:11434/v1 "
                             "(else KERNELKB_LLM_BASE_URL or OPENAI_BASE_URL)")
    parser.add_argument("--llm-timeout-s", type=float, default=120.0, metavar="S",
                        help="--agent llm: seconds one reply may take (default 120); a "
                             "round with no answer by then is a failed round, three in a "
                             "row stop the run")
    parser.add_argument("--llm-retries", type=int, default=2, metavar="N",
                        help="--agent llm: the openai client's retries of a request that "
                             "failed to connect, timed out, or got 429/5xx (default 2)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the agent's random seed (offline and tuner agents)")
    add_scale_flags(parser, "a candidate of each round")


def tasks_dir_flag(parser: argparse.ArgumentParser) -> None:
    """--tasks-dir, on every command that takes a task (kernelkb/cli/main.py reads it, with the
    tasks_dir setting, before the command runs)."""
    parser.add_argument("--tasks-dir", action="append", default=[], metavar="DIR",
                        help="a folder of one's own task files (repeatable; adds to "
                             "KERNELKB_TASKS_DIR)")


def run(args: argparse.Namespace) -> int:
    from kernelkb.kb.settings import Settings
    from kernelkb.kb.terminal import quiet_own_logs
    from kernelkb.kernels.shared.errors import UserFixable

    if not getattr(args, "verbose", False):
        quiet_own_logs()
    try:
        pool = open_pool(args)  # first: a Ray cluster's GPUs make this a GPU run
    except (ValueError, UserFixable) as err:
        return said(err, 2)
    try:
        return _run(args, Settings(), pool)
    finally:
        if pool is not None:
            pool.close()


def _run(args: argparse.Namespace, settings: Any, pool: Any) -> int:
    import torch

    from kernelkb.kernels.discovery import get_task
    from kernelkb.operations import open_for_runs
    from kernelkb.optimizer.agents.base import AgentUnavailable
    from kernelkb.optimizer.loop import LoopOptions, StartFailed
    from kernelkb.optimizer.policy import PolicyConfig, StopReason
    from kernelkb.optimizer.session import optimize

    on_gpu = torch.cuda.is_available() if pool is None else pool.on_gpu
    if args.max_iters is None:
        args.max_iters = GPU_MAX_ITERS if on_gpu else CPU_MAX_ITERS
    out_dir = args.out or settings.runs_dir
    assert out_dir is not None  # Settings fills runs_dir in (home / "runs")
    try:  # every argument checked before the store opens or the model loads
        if args.resume:
            args.task = resumed_task(args, Path(out_dir))
        elif not args.task:
            raise ValueError("name the task to optimize (e.g. softmax), or --resume RUN")
        task_name = check_arguments(args)
        given = run_shapes(args, get_task(task_name), on_gpu)
        policy = PolicyConfig(patience=args.patience, max_iters=args.max_iters,
                              target_speedup=args.target_speedup, budget_s=args.budget_s,
                              explore_every=args.explore_every)
        agent = make_agent(args, settings)
    except ValueError as err:
        return said(err, 2)
    try:
        agent.preflight()  # before the store opens; optimize() asks again, at no cost
    except AgentUnavailable as err:
        return said(err, 1)
    options = LoopOptions(dtype=args.dtype, shapes=given.shapes, sweep_shapes=given.sweep_shapes,
                          seeds=args.seeds, timeout_s=args.timeout_s,
                          retrieval=not args.no_retrieval, peers=not args.no_peers,
                          regimes=given.regimes)
    for line in given.said:
        progress.info("%s", line)
    if pool is not None:
        progress.info("measuring on %s: up to %d candidates a round, each timed against the "
                      "best so far on its own GPU", pool.where, pool.slots)
    from kernelkb.kb.terminal import progress as progress_bar

    knowledge, write_back = open_for_runs(settings)
    resume = None
    if args.resume:
        from kernelkb.optimizer.resume import CannotResume, resume_from

        try:
            resume = resume_from(Path(out_dir), args.resume, knowledge)
        except CannotResume as err:
            return said(err, 2)
        progress.info("resuming %s: %d rounds used before it stopped%s", resume.run_id,
                      resume.rounds_used, f"; done: {', '.join(resume.done)}"
                      if resume.done else "")
    if not on_gpu:
        shared = ("plus a baseline and a final sweep of the regime" if len(args.regime) == 1
                  else "shared by the task's shape regimes, each of which also runs a "
                  "baseline and a final sweep")
        progress.info("no GPU here: the CPU interpreter checks correctness only, nothing will "
                      "be timed, and every round's verdict is neutral (untimed); at most %d "
                      "round%s in all (--max-iters), %s; kept in the run's journal%s",
                      args.max_iters, "" if args.max_iters == 1 else "s", shared,
                      " and the store (--keep-untimed)" if args.keep_untimed else
                      ", not the store (--keep-untimed stores them)")
        write_back = write_back and args.keep_untimed
    interrupt_on_sigterm()
    with progress_bar(f"optimize {task_name}: baseline and round 1") as bar:
        done: list[Any] = []

        def on_round(outcome: Any) -> None:
            log_round(outcome)
            done.append(outcome)

        def on_evaluating(iteration: int, kind: str, regime: str | None) -> None:
            bar.update(description=spinner_text(task_name, iteration, kind, regime, done,
                                                args.max_iters))

        try:
            result = optimize(task_name, agent, out_dir=out_dir, resume=resume,
                              knowledge=knowledge, write_back=write_back,
                              policy=policy, options=options, journal_path=args.journal,
                              command="kernelkb " + shlex.join(sys.argv[1:]),
                              on_round=on_round, on_evaluating=on_evaluating,
                              agent_factory=lambda: make_agent(args, settings), pool=pool)
        except (StartFailed, AgentUnavailable) as err:
            return said(err, 1)
        except ValueError as err:  # a resumed run with nothing left to do
            if resume is None:
                raise
            return said(err, 2)
    progress.info("stopped by %s after %s; report %s; kernel %s",
                  result.stop_reason.value, rounds_text(result.rounds), result.report_path,
                  result.export_path)
    if result.env.arch == "cpu":
        progress.info("nothing was timed: no GPU here, the CPU interpreter checked "
                      "correctness only")
    if result.stop_reason is StopReason.agent_unavailable:
        return said(result.failure, 1)
    if result.stop_reason is StopReason.interrupt:  # written up, but not a finished run
        return 128 + (SIGNALLED.get("signum") or signal.SIGINT)
    return 0


def resumed_task(args: argparse.Namespace, runs_dir: Path) -> str:
    """The task of the run to resume (its run.json says it); a different one named on
    the command line is an error."""
    import json

    from kernelkb.optimizer.run_file import FILE

    folder = Path(args.resume) if Path(args.resume).is_dir() else runs_dir / args.resume
    try:
        task = json.loads((folder / FILE).read_text(encoding="utf-8")).get("task")
    except (OSError, ValueError):
        task = None
    if not task and not args.task:
        raise ValueError(f"--resume {args.resume}: no run folder with a run.json at {folder}")
    if task and args.task and args.task.lower() != str(task).lower():
        raise ValueError(f"--resume {args.resume}: that run optimized {task}, not {args.task}")
    return str(task or args.task)


def said(err: object, status: int) -> int:
    """A user's error as one plain sentence on stderr (not a log record), and its exit
    status: 2 for a value the user gave, 1 for an endpoint or start that failed."""
    print(f"kernelkb optimize: {err}", file=sys.stderr, flush=True)
    return status


def check_arguments(args: argparse.Namespace) -> str:
    """The task's registered name (any case: "Softmax"); ValueError naming the flag for an
    unknown task, a dtype the task lacks, an unknown shape set or a value out of range."""
    import torch

    from kernelkb.kernels.discovery import all_tasks
    from kernelkb.kernels.model_shapes import is_shape_list
    from kernelkb.optimizer.sandbox.evaluator import resolve_shapes, sweep_shape_set
    from kernelkb.retrieval.names import match_name

    tasks = all_tasks()
    name = match_name("task", args.task, tasks)
    task = tasks[name]
    if args.dtype not in task.tolerances:
        raise ValueError(f"--dtype {args.dtype!r}: {name} runs in "
                         f"{', '.join(sorted(task.tolerances))}")
    on_gpu = torch.cuda.is_available()
    for flag, value in (("--shapes", args.shapes),
                        ("--sweep-shapes", sweep_shape_set(args.sweep_shapes, on_gpu))):
        if flag == "--shapes" and isinstance(value, str) and is_shape_list(value):
            continue  # a listed --shapes: run_shapes checks it
        try:
            resolve_shapes(task, value, on_gpu)
        except ValueError as err:
            raise ValueError(f"{flag}: {err}") from err
    names = task.regimes.names if task.regimes is not None else ()
    for regime in getattr(args, "regime", []):
        if regime not in names:
            raise ValueError(f"--regime {regime!r}: {name}'s regimes are "
                             f"{', '.join(names) or 'none'}")
    for flag, value in (("--seeds", args.seeds), ("--timeout-s", args.timeout_s)):
        if value <= 0:
            raise ValueError(f"{flag} {value}: must be above 0")
    if args.agent == "llm" and getattr(args, "model", None) == "":
        raise ValueError("--model: empty")
    return name


SIGNALLED: dict[str, int] = {}  # the signal that stopped the run, for its exit status


def interrupt_on_sigterm() -> None:
    """Let SIGTERM (what `timeout` and job schedulers send) stop a run as Ctrl-C does: the
    rounds done are written up (report, exported kernel, journal) instead of lost; the
    command then exits 128 + the signal (143; 130 for Ctrl-C), as a shell reports it."""
    def handler(signum: int, frame: Any) -> None:
        SIGNALLED["signum"] = signum
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def make_agent(args: argparse.Namespace, settings: Any) -> Any:
    if args.agent == "offline":
        from kernelkb.optimizer.agents.offline import OfflineAgent

        return OfflineAgent(seed=args.seed)
    if args.agent == "tuner":
        from kernelkb.optimizer.agents.tuner import TunerAgent

        return TunerAgent(search=args.search, seed=args.seed)
    from kernelkb.optimizer.agents.llm import LLMAgent, LLMSettings

    model = args.model or settings.llm_model
    if not model:
        raise ValueError("--agent llm needs a model: --model or KERNELKB_LLM_MODEL")
    base_url = getattr(args, "base_url", None) or settings.llm_base_url
    if not base_url and not settings.llm_api_key:
        raise ValueError(
            "--agent llm needs an endpoint: --base-url URL for a local server (vLLM: "
            "http://localhost:8000/v1, Ollama: http://localhost:11434/v1), or an API key "
            "(KERNELKB_LLM_API_KEY or OPENAI_API_KEY) for the public OpenAI endpoint")
    return LLMAgent(LLMSettings(base_url=base_url, model=model, api_key=settings.llm_api_key,
                                timeout_s=args.llm_timeout_s, retries=args.llm_retries))


def rounds_text(rounds: list[Any]) -> str:
    """"3 rounds (and 3 baselines)": the rounds --max-iters counts, apart from the
    baseline each shape regime runs first (a 3-round run over 3 regimes once said
    "after 5 rounds")."""
    baselines = sum(o.kind == "baseline" for o in rounds)
    count = len(rounds) - baselines
    text = f"{count} round{'s' if count != 1 else ''}"
    if baselines > 1:
        text += f" (and {baselines} baselines, one per shape regime)"
    return text


def spinner_text(task: str, iteration: int, kind: str, regime: str | None,
                 done: list[Any], max_iters: int) -> str:
    """What runs now, in the terms of --max-iters: a baseline and a final sweep are no
    round (the spinner once read "round 2 (max 3)" during a final sweep)."""
    rounds = sum(o.kind != "baseline" for o in done)  # what --max-iters counts
    best = next((f", best {o.best_ms:.4f} ms" for o in reversed(done)
                 if o.best_ms is not None), "")
    now = {"baseline": "baseline", "sweep": "final sweep"}.get(kind, f"round {iteration}")
    where = f" of {regime}" if regime else ""
    return f"optimize {task}: {now}{where} ({rounds} of at most {max_iters} rounds done{best})"


def log_round(outcome: Any) -> None:
    time_text = f"{outcome.time_ms:.4f} ms" if outcome.time_ms is not None else "untimed"
    best = f"best {outcome.best_ms:.4f} ms" if outcome.best_ms is not None else "best -"
    mark = " *new best*" if outcome.improved else ""
    shown = 300 if outcome.verdict == "failed" else 90  # a failure's reason, in full
    progress.info("round %3d %-8s %-9s %-10s %s | %s%s", outcome.iteration, outcome.kind,
                  outcome.verdict, time_text, best, outcome.summary[:shown], mark)


COMMANDS = (Command("optimize", HELP, add_arguments, run),)
