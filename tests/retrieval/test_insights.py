"""Insights by category and the bootstrap plan for unseen hardware."""

from __future__ import annotations

from kb_testdata import record_dict

from kernelkb.service import LocalKnowledge

H200_TARGET = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132,
               "mem_bandwidth_gbps": 4800, "smem_per_sm_kib": 228}


def test_insights_aggregate_by_category(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(summary="t1", speedup=1.2, config={"B": 1}),
        record_dict(summary="t2", speedup=1.6, config={"B": 2}),
        record_dict(summary="t3", verdict="regressed", speedup=0.9, config={"B": 3}),
        record_dict(summary="w1", categories=("warps_stages",), verdict="neutral", speedup=1.0),
        record_dict(hw="A100", summary="elsewhere", speedup=3.0),
    ])
    report = knowledge.insights(op_type="softmax", gpu_name="NVIDIA H200")
    tiling = next(c for c in report.categories if c.category == "tiling")
    assert (tiling.count, tiling.wins, tiling.losses) == (3, 2, 1)
    assert tiling.median_speedup == 1.4 and tiling.best_speedup == 1.6
    assert abs(tiling.win_rate - 2 / 3) < 1e-3 and len(tiling.example_ids) == 2
    assert report.categories[0].category == "tiling" and report.total == 4


def test_bootstrap_ranks_similar_hardware_first(knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(hw="H100", summary="h100 win", speedup=1.5, config={"B": 1}),
        record_dict(hw="A100", summary="a100 win", speedup=2.5, config={"B": 2}),
        record_dict(hw="L4", summary="l4 win", speedup=1.1, config={"B": 3}),
    ])
    target = H200_TARGET
    plan = knowledge.bootstrap(target)
    assert [m.gpu_name for m in plan.similar_hardware][0] == "NVIDIA H100 80GB HBM3"
    assert plan.similar_hardware[-1].gpu_name == "NVIDIA L4"
    assert plan.items and plan.items[0].from_hardware.startswith("NVIDIA H100")
    assert all(item.evidence and item.example_ids for item in plan.items)


def test_bootstrap_with_include_own_also_offers_the_target_gpus_own_best_config(
        knowledge: LocalKnowledge) -> None:
    knowledge.ingest([
        record_dict(hw="H200", summary="own best", speedup=1.8, config={"B": 4}),
        record_dict(hw="H200", summary="own lesser", speedup=1.2, config={"B": 2}),
        record_dict(hw="H100", summary="h100 win", speedup=1.5, config={"B": 1}),
    ])
    target = H200_TARGET
    others = knowledge.bootstrap(target, op_type="softmax")
    assert "NVIDIA H200" not in [m.gpu_name for m in others.similar_hardware]
    own = knowledge.bootstrap(target, op_type="softmax", include_own=True)
    configs = [i for i in own.items if i.kind == "config"]
    first = configs[0]
    assert first.config == {"B": 4} and first.from_hardware.startswith("NVIDIA H200")
    assert (first.task_id, first.dtype, first.similarity) == ("softmax", "float16", 1.0)
    assert {i.config["B"] for i in configs} == {4, 1}  # one best per task and hardware


def test_the_optimizer_takes_only_this_tasks_configs_from_alike_gpus(
        knowledge: LocalKnowledge) -> None:
    from kb_testdata import HARDWARE

    from kernelkb.kb.record import Environment
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.recall import known_configs

    softmax = get_task("softmax")
    best = {**softmax.default_config, "NUM_WARPS": 8}
    knowledge.ingest([
        record_dict(hw="H200", summary="full config", speedup=1.1, config=best),
        record_dict(hw="H200", summary="other dtype", speedup=1.9, config=best, dtype="bfloat16"),
        record_dict(hw="H200", summary="partial config", speedup=1.5, config={"NUM_WARPS": 8},
                    task="softmax_variant"),
        record_dict(hw="L4", summary="far card", speedup=3.0,
                    config={**best, "NUM_WARPS": 16}),
    ])
    env = Environment(**HARDWARE["H200"], triton_version="3.6.0", torch_version="2.11")
    items = known_configs(knowledge, softmax, "float16", env)
    assert [i.config for i in items] == [best]
    cpu = Environment(gpu_name="cpu", arch="cpu", triton_version="3.6.0", torch_version="2.11")
    assert known_configs(knowledge, softmax, "float16", cpu) == []


def test_a_task_with_nothing_measured_here_adopts_its_related_ops_best(
        knowledge: LocalKnowledge) -> None:
    """Cross-task transfer of a whole configuration: a user's LayerNorm written with
    RMSNorm's knob names, nothing of it measured yet, starts from RMSNorm's best on this
    GPU cut to the knobs the two share; a related configuration made mostly of knobs the
    task does not have carries nothing."""
    import dataclasses

    from kb_testdata import HARDWARE

    from kernelkb.kb.record import Environment
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.agents.base import AgentContext
    from kernelkb.optimizer.agents.offline import OfflineAgent
    from kernelkb.optimizer.recall import known_configs

    rmsnorm = get_task("rmsnorm")
    layernorm = dataclasses.replace(
        rmsnorm, name="layernorm_user", op_type="layernorm_user", related_ops=("rmsnorm",),
        knobs=tuple(k for k in rmsnorm.knobs if k.name != "NATIVE_WEIGHT_MUL"),
        variants=tuple(v for v in rmsnorm.variants if v.name != "NATIVE_WEIGHT_MUL"))
    best = {**rmsnorm.default_config, "BLOCK_SIZE": 1024, "NUM_WARPS": 8}
    knowledge.ingest([
        record_dict(op="rmsnorm", task="rmsnorm", hw="H200", summary="whole rows",
                    speedup=12.0, config=best, run="rms"),
        record_dict(op="rmsnorm", task="rmsnorm_foreign", hw="H200", summary="foreign",
                    speedup=20.0, config={"A": 1, "B": 2, "C": 3, "NUM_WARPS": 8},
                    run="foreign"),
    ])
    env = Environment(**HARDWARE["H200"], triton_version="3.6.0", torch_version="2.11")
    items = known_configs(knowledge, layernorm, "float16", env)
    carried = {k: v for k, v in best.items() if k != "NATIVE_WEIGHT_MUL"}
    assert [(i.kind, i.config) for i in items] == [
        ("related", {**layernorm.default_config, **carried})]
    assert items[0].evidence.startswith("rmsnorm's ") and "NATIVE_WEIGHT_MUL" in \
        items[0].evidence  # says what did not carry over
    proposal = OfflineAgent(epsilon=0.0).propose(AgentContext(
        task=layernorm, dtype="float16", iteration=1, round_kind="exploit",
        best_source=layernorm.template, gpu_arch="sm_90", known_configs=items))
    assert proposal.summary == "adopt a related op's best configuration: BLOCK_SIZE=1024, " \
                               "NUM_WARPS=8" and "rmsnorm's" in proposal.rationale
    assert known_configs(knowledge, rmsnorm, "float16", env)[0].kind == "config"  # own first


def timed_record(shapes_ms: dict[str, float], **kwargs) -> dict:
    """A measured H200 record timed on ``shapes_ms`` (label -> median ms)."""
    record = record_dict(hw="H200", **kwargs)
    record["feedback"]["timings"] = [{"shape": s, "median_ms": ms} for s, ms in shapes_ms.items()]
    return record


def test_bootstrap_for_shapes_takes_the_fastest_there_not_the_largest_speedup(
        knowledge: LocalKnowledge) -> None:
    """A space run that began from a slow start on long rows has the largest speedup over
    its start; asked for short-row shapes, the plan offers the configuration measured
    fastest on them (the HTTP API: tests/api/test_http.py)."""
    short, mid, long_ = "rows=128,cols=4096", "rows=4096,cols=4096", "rows=1024,cols=128256"
    knowledge.ingest([
        timed_record({short: 0.010, long_: 0.20}, summary="space run", speedup=14.0,
               config={"B": 1}, run="space"),
        timed_record({short: 0.006, mid: 0.020}, summary="tuned short rows", speedup=1.2,
               config={"B": 2}, run="short"),
        timed_record({short: 0.007, mid: 0.019}, summary="a near second", speedup=1.1,
               config={"B": 3}, run="short2"),
        timed_record({long_: 0.15}, summary="long rows only", speedup=1.3, config={"B": 4},
                     run="long"),
        timed_record({"other=1": 0.5}, summary="another task, other shapes", speedup=2.0,
                     config={"C": 1}, run="other", task="softmax_other"),
    ])

    def best(plan) -> tuple[dict, str]:
        item = next(i for i in plan.items if i.kind == "config" and i.task_id == "softmax")
        return item.config, item.evidence

    assert best(knowledge.bootstrap(H200_TARGET, op_type="softmax", include_own=True))[0] \
        == {"B": 1}  # without shapes: the largest speedup over its own start
    config, evidence = best(knowledge.bootstrap(H200_TARGET, op_type="softmax",
                                                include_own=True, shapes=[short, mid]))
    # B=2: 1.0x on short, 1.05x on mid (geomean 1.025); B=3: 1.17x and 1.0x; B=1: 1.67x
    assert config == {"B": 2}
    asked = knowledge.bootstrap(H200_TARGET, op_type="softmax", include_own=True,
                                shapes=[short, mid])
    assert asked.items[0].kind == "config"  # asked about shapes: configurations lead
    assert "over 2 of the 2 shapes" in evidence and "1.03x" in evidence
    plan = knowledge.bootstrap(H200_TARGET, op_type="softmax", include_own=True,
                               shapes=[long_])
    assert best(plan)[0] == {"B": 4}
    # a task no record was timed on these shapes for keeps its largest speedup
    other = next(i for i in plan.items if i.kind == "config" and i.task_id == "softmax_other")
    assert other.config == {"C": 1} and "vs baseline" in other.evidence


def test_shapes_never_measured_are_read_from_the_nearest_measured_shape(
        knowledge: LocalKnowledge) -> None:
    """A user's task (or a related op's records) timed on other sizes: each shape asked is
    read from the nearest measured shape with the same dimension names, within 4x in one
    dimension; without that the plan fell back to the largest speedup over a run's start."""
    from kernelkb.retrieval.hardware import stand_ins

    near, far = "rows=4096,cols=5120", "rows=1024,cols=131072"
    assert stand_ins(["rows=4096,cols=4608", "rows=128,cols=4096", "tokens=8,d=2", "odd"],
                     {near, far, "tokens=64,d=2"}) == {
        "rows=4096,cols=4608": near,  # 1.1x off in one dimension
        "rows=128,cols=4096": "rows=128,cols=4096",  # 32x off in rows: nothing stands in
        "tokens=8,d=2": "tokens=8,d=2",  # 8x off
        "odd": "odd"}  # not a label of sizes
    knowledge.ingest([
        timed_record({near: 0.030}, summary="slow start, huge gain", speedup=9.0,
                     config={"B": 1}, run="space"),
        timed_record({near: 0.020}, summary="fastest near these shapes", speedup=1.2,
                     config={"B": 2}, run="tuned"),
    ])
    plan = knowledge.bootstrap(H200_TARGET, op_type="softmax", include_own=True,
                               shapes=["rows=4096,cols=4608", "rows=2048,cols=4096"])
    item = next(i for i in plan.items if i.kind == "config" and i.task_id == "softmax")
    assert item.config == {"B": 2}
    assert "over 2 of the 2 shapes asked (2 read from the nearest measured shape)" \
        in item.evidence, item.evidence


def test_one_lucky_shape_does_not_decide_and_gpu_time_does(
        knowledge: LocalKnowledge) -> None:
    """Split-K measured on M=16 alone is the fastest there, but the regime also runs
    M=128, where it was never timed: a configuration timed on both and near the best on
    each is offered. GPU time decides where records have it: the split-K's call time
    carries a second Python launch that its GPU time does not."""
    m16, m128 = "M=16,N=4096,K=4096", "M=128,N=4096,K=4096"

    def gpu_timed(gpu: dict[str, float], call: float, **kwargs) -> dict:
        record = timed_record({s: call for s in gpu}, task="matmul", op="matmul", **kwargs)
        for timing in record["feedback"]["timings"]:
            timing["graph_ms"] = gpu[timing["shape"]]
        return record

    knowledge.ingest([
        gpu_timed({m16: 0.0120}, call=0.040, summary="split-K", config={"SPLIT_K": 4},
                  run="a"),
        gpu_timed({m16: 0.0141, m128: 0.0154}, call=0.030, summary="64x64, 6 stages",
                  config={"SPLIT_K": 1, "NUM_STAGES": 6}, run="b"),
        gpu_timed({m16: 0.0290, m128: 0.0298}, call=0.029, summary="128-row tiles",
                  config={"SPLIT_K": 1, "BLOCK_M": 128}, run="c"),
    ])
    plan = knowledge.bootstrap(H200_TARGET, op_type="matmul", include_own=True,
                               shapes=[m16, m128])
    item = next(i for i in plan.items if i.kind == "config")
    # 64x64: 1.175x on M=16, 1.0x on M=128; split-K: 1.0x, and M=128 as the slowest (1.94x)
    assert item.config == {"SPLIT_K": 1, "NUM_STAGES": 6}
    assert "over 2 of the 2 shapes" in item.evidence and "1.08x" in item.evidence
    only16 = knowledge.bootstrap(H200_TARGET, op_type="matmul", include_own=True, shapes=[m16])
    assert next(i for i in only16.items if i.kind == "config").config == {"SPLIT_K": 4}


def test_a_regime_loop_adopts_the_fastest_on_its_own_shapes(knowledge: LocalKnowledge) -> None:
    """The optimizer's loop for one regime asks with its round and sweep shapes: the
    configuration it offers to adopt is the one measured fastest there."""
    from kb_testdata import HARDWARE

    from kernelkb.kb.record import Environment
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.experience import RunInfo
    from kernelkb.optimizer.loop import Loop, LoopOptions
    from kernelkb.optimizer.recall import known_configs

    softmax = get_task("softmax")
    fast_long = {**softmax.default_config, "NUM_WARPS": 16}
    fast_short = {**softmax.default_config, "NUM_WARPS": 4}
    short, long_ = (128, 4096), (1024, 128256)  # medium_rows and long_rows
    label = softmax.shape_label
    knowledge.ingest([
        timed_record({label(short): 0.009, label(long_): 0.20}, summary="long-row winner",
                     speedup=9.0, config=fast_long, run="a"),
        timed_record({label(short): 0.004}, summary="short-row winner", speedup=1.1,
                     config=fast_short, run="b"),
    ])
    env = Environment(**HARDWARE["H200"], triton_version="3.6.0", torch_version="2.11")
    assert [i.config for i in known_configs(knowledge, softmax, "float16", env)][0] \
        == fast_long
    info = RunInfo("run", softmax, "float16", label(short), env, "offline", None, "test",
                   regime="medium_rows")
    loop = Loop(softmax, agent=None, info=info, evaluator=None, writeback=None, policy=None,
                knowledge=knowledge, options=LoopOptions(shapes=[short], sweep_shapes=[short]))
    assert loop._regime_labels() == [label(short)]
    whole = Loop(softmax, agent=None, info=RunInfo("run", softmax, "float16", "auto", env,
                                                   "offline", None, "test"),
                 evaluator=None, writeback=None, policy=None, knowledge=knowledge,
                 options=LoopOptions())  # one regime, "auto" shapes: the task's sweep
    assert whole._regime_labels() == [label(s) for s in softmax.sweep_shapes]
    assert [i.config for i in known_configs(knowledge, softmax, "float16", env,
                                            shapes=loop._regime_labels())][0] == fast_short
