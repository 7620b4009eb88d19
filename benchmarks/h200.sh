#!/usr/bin/env bash
# Runs on the lent H200 (device tool): installs the carried wheels, then the named stages.
# Every stage is resumable or idempotent; results go to benchmarks/ and are copied to $OUT.
#   bash benchmarks/h200.sh gputests peers space optimize:softmax vs:softmax confirm launch variants
#   bash benchmarks/h200.sh revalidate:softmax revalidate:rmsnorm   (TOP=3: configs per task)
#   bash benchmarks/h200.sh hostcost   (host cost of a call: ours vs eager / compile / Liger)
#   bash benchmarks/h200.sh exportcost   (the exported op on model shapes vs its peers; EC_TASKS)
#   NOISE_BUDGET_S=300 bash benchmarks/h200.sh noise   (verdict noise, resumed to 30 A/A a task)
#   bash benchmarks/h200.sh jail   (the jail and containment tests as root on the GPU host)
#   bash benchmarks/h200.sh cost   (cost per evaluation against .out/base, carried; COST_FLAGS)
#   bash benchmarks/h200.sh cuptistart   (what reading the GPU's own timestamps costs)
#   bash benchmarks/h200.sh profile:softmax   (the worker's steps with the rules off and on)
#   bash benchmarks/h200.sh doors:softmax,matmul   (where each door's seconds go; DOORS_FLAGS)
#   GPU_K=expr bash benchmarks/h200.sh gputests   (only the GPU tests -k expr selects;
#     GPU_DIST=load spreads one file's tests over the workers; GPU_WORKERS=1 runs them
#     one at a time: evaluations that each hold GiBs for the wide laps share one card)
#   bash benchmarks/h200.sh ab:layernorm   (the retrieval A/B afresh, ~6 min for one task;
#     AB_BUDGET_S, AB_ITERS, AB_PARALLEL, AB_REPEATS: each run's budget and rounds, runs at once)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
# the CUPTI bindings where a user's install puts them: the sandbox's worker sees the
# environment's site-packages, not /tmp (kernel_clock.py; pip install "kernelkb[cupti]")
# (PYTHONPATH unset: pip would take the copy in /tmp/site as installed)
# (cupti-python 13.4 imports elftools at its import: its pyelftools travels beside it)
PYTHONPATH= python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/cupti_python-*.whl .whl/pyelftools-*.whl 2>&1 | tail -3
PYTHONPATH= python3 -c "import cupti.cupti" 2>&1 | tail -1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# BUDGET_S counts from here, after the installs above (~20 s): keep it 60 s under the call
deadline=$(( $(date +%s) + ${BUDGET_S:-520} ))
# one sweep folder per GPU model (a journal resumes only on its own device): the H200's is
# benchmarks/sweeps, another card's benchmarks/sweeps_<model> (e.g. sweeps_h100)
model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -o '[ABHL][0-9]\+' | head -1 | tr A-Z a-z)
sweeps=benchmarks/sweeps; [ -n "$model" ] && [ "$model" != h200 ] && sweeps=benchmarks/sweeps_$model
left() { echo $(( deadline - $(date +%s) )); }
for stage in "$@"; do
  echo "=== $stage ($(left) s left)"
  case $stage in
    # every test file with GPU tests (the rest import the service's packages, absent here)
    # three pytest workers, one file each: the space test's compile pool (on the cores the
    # other two leave) runs beside the sandbox and peer tests instead of before them
    # -v names each result as it lands; the limit sends SIGINT, so pytest still prints
    # its summary (-rA: each failure's details)
    gputests) s=$(date +%s); par="-p no:xdist"; python3 -c "import xdist" 2>/dev/null && par="-n ${GPU_WORKERS:-3} --dist ${GPU_DIST:-loadfile}"; timeout -s INT -k 20 $(( $(left) - 40 )) python3 -m pytest -o addopts='--strict-markers' $par -m gpu ${GPU_K:+-k "$GPU_K"} -v -rA --durations=15 --junitxml="$OUT/gputests.xml" $(grep -rl "mark.gpu" tests) > "$OUT/gputests.log" 2>&1; echo "rc=$? wall=$(( $(date +%s) - s )) s" >> "$OUT/gputests.log"; tail -40 "$OUT/gputests.log" ;;
    # small-M matmul candidates outside the space, round N (benchmarks/variants.py --wide N)
    wide:*) timeout $(( $(left) - 20 )) python3 benchmarks/variants.py explore --wide ${stage#wide:} --tasks ${WIDE_TASKS:-matmul} --budget-s $(( $(left) - 60 )) --out benchmarks/results > "$OUT/wide.log" 2>&1; echo "rc=$?" >> "$OUT/wide.log" ;;
    # the final stage for some tasks only (files tagged with the task names): final:softmax,matmul
    final:*) t=${stage#final:}; timeout $(( $(left) - 20 )) python3 benchmarks/variants.py final --choice benchmarks/results/variants_explore_h200.json --tasks ${t//,/ } --tag "_${t//,/_}" --budget-s $(( $(left) - 60 )) --out benchmarks/results > "$OUT/final.log" 2>&1; echo "rc=$?" >> "$OUT/final.log" ;;
    # A/A and known-slower verdicts, resumed from the JSON in benchmarks/results; NOISE_FLAGS
    # adds e.g. --fresh-machine when this is the machine's first stage
    noise) timeout $(( $(left) - 20 )) python3 benchmarks/verdict_noise.py --evals 30 --slower 10 --parallel 4 --budget-s ${NOISE_BUDGET_S:-$(( $(left) - 60 ))} ${NOISE_FLAGS-} --resume benchmarks/results/verdict_noise_h200.json --out benchmarks/results > "$OUT/noise.log" 2>&1; echo "rc=$?" >> "$OUT/noise.log" ;;
    # cost per evaluation, this checkout against .out/base (carried: see eval_cost.py)
    cost) timeout $(( $(left) - 20 )) python3 benchmarks/eval_cost.py --base .out/base --tasks ${COST_TASKS:-softmax} --repeats ${COST_REPEATS:-2} ${COST_FLAGS-} > "$OUT/cost.log" 2>&1; echo "rc=$?" >> "$OUT/cost.log" ;;
    # the retrieval A/B afresh for some tasks (results under $OUT/ab, beside the shipped ones)
    ab:*) t=${stage#ab:}; timeout $(( $(left) - 20 )) python3 benchmarks/retrieval_ab.py --tasks ${t//,/ } --repeats ${AB_REPEATS:-3} --budget-s ${AB_BUDGET_S:-60} --max-iters ${AB_ITERS:-10} --parallel ${AB_PARALLEL:-4} --work /tmp/ab --out "$OUT/ab" > "$OUT/ab.log" 2>&1; echo "rc=$?" >> "$OUT/ab.log" ;;
    # the whole space of some tasks through the fast door (kernelkb sweep), resumable; one
    # command, so each next task x dtype compiles on the host's cores while one is timed
    sweep:*) t=${stage#sweep:}; s=${SWEEP_S:-$(left)}; [ $s -gt $(left) ] && s=$(left); timeout $(( s - 20 )) python3 -m kernelkb sweep ${t//,/ } ${SWEEP_DTYPES:---dtype float16} --out $sweeps 2>&1 | grep --line-buffered -v Warning >> "$OUT/sweep.log"; grep -v "^\[" "$OUT/sweep.log" | tail -24 ;;
    # A/A and twice the work through the fast door, alone and beside a neighbour process
    fastdoor) timeout $(( $(left) - 20 )) python3 benchmarks/fast_door.py --aa ${AA:-30} --slower ${SLOWER:-10} --out benchmarks/results > "$OUT/fastdoor.log" 2>&1; echo "rc=$?" >> "$OUT/fastdoor.log"; cat "$OUT/fastdoor.log" | tail -20 ;;
    # the fast door beside Triton's autotuner's benchmark loop, same configurations and shapes
    autotune) timeout $(( $(left) - 20 )) python3 benchmarks/autotune_rate.py --tasks ${AT_TASKS:-softmax} --limit ${AT_LIMIT:-8} --repeats ${AT_REPEATS:-2} --out benchmarks/results/autotune_rate_h200.json > "$OUT/autotune.log" 2>&1; echo "rc=$?" >> "$OUT/autotune.log"; tail -8 "$OUT/autotune.log" ;;
    jail) timeout $(( $(left) - 20 )) python3 -m pytest -o addopts="--strict-markers" -p no:cacheprovider -rA tests/optimizer/sandbox/test_jail_root.py tests/optimizer/sandbox/test_jailbreak.py tests/optimizer/sandbox/test_containment.py > "$OUT/jail.log" 2>&1; echo "rc=$?" >> "$OUT/jail.log"; tail -30 "$OUT/jail.log" ;;
    peers) timeout $(( $(left) - 30 )) python3 benchmarks/peers.py --runs benchmarks/runs > "$OUT/peers.log" 2>&1; echo "rc=$?" >> "$OUT/peers.log" ;;
    space) timeout $(( $(left) - 20 )) python3 benchmarks/measure_space.py --workers 14 --tasks ${SPACE_TASKS:-attention rmsnorm softmax swiglu rope matmul} > "$OUT/space.log" 2>&1 ;;
    smoke) timeout $(( $(left) - 30 )) python3 -m kernelkb optimize softmax --no-retrieval --max-iters 3 --out runs_smoke 2>&1 | tail -30 ;;
    optimize:*) t=${stage#optimize:}; timeout $(( $(left) - 30 )) python3 -m kernelkb optimize "$t" ${OPT_FLAGS-} --max-iters ${ITERS:-25} --patience 6 --budget-s ${TASK_BUDGET_S:-120} --out benchmarks/runs 2>&1 | grep --line-buffered -v Warning | tee -a "$OUT/optimize.log" | tail -40 ;;
    vs:*) t=${stage#vs:}; timeout $(( $(left) - 20 )) python3 benchmarks/peers.py --tasks ${t//,/ } --runs benchmarks/runs --tag "_optimized_${t//,/_}" 2>&1 | grep --line-buffered -v Warning | tail -80 > "$OUT/vs.log" ;;
    overhead) timeout $(( $(left) - 20 )) python3 benchmarks/sandbox_overhead.py --runs ${RUNS:-5} > "$OUT/overhead.log" 2>&1; echo "rc=$?" >> "$OUT/overhead.log" ;;
    # DRAM bytes per kernel from hardware counters (torch.profiler / CUPTI): why a miss
    dram) timeout $(( $(left) - 20 )) python3 benchmarks/dram_traffic.py --out "$OUT" > "$OUT/dram.log" 2>&1; echo "rc=$?" >> "$OUT/dram.log" ;;
    # the GPU-timestamp readers' first and later sessions, fresh process each
    cuptistart) timeout $(( $(left) - 20 )) python3 benchmarks/cupti_start.py > "$OUT/cupti_start.log" 2>&1; echo "rc=$?" >> "$OUT/cupti_start.log" ;;
    # where each door's seconds go: the full judge's laps, the fast door's checks and timing
    doors:*) for t in $(echo ${stage#doors:} | tr , ' '); do timeout $(( $(left) - 20 )) python3 benchmarks/profile_doors.py "$t" ${DOORS_FLAGS-} > "$OUT/doors_$t.txt" 2>&1; echo "rc=$?" >> "$OUT/doors_$t.txt"; done ;;
    profile:*) t=${stage#profile:}; timeout $(( $(left) - 20 )) python3 benchmarks/profile_worker.py "$t" > "$OUT/profile_$t.txt" 2>&1; echo "rc=$?" >> "$OUT/profile_$t.txt" ;;
    scaleout) timeout $(( $(left) - 20 )) python3 benchmarks/scale_out.py --slots ${SLOTS:-1} --jobs ${JOBS:-8} --repeats ${REPEATS:-3} > "$OUT/scale_out.log" 2>&1; echo "rc=$?" >> "$OUT/scale_out.log"; tail -8 "$OUT/scale_out.log" ;;
    # the exported op on Llama / Qwen / Mixtral shapes beside its peers (issue 48's table)
    exportcost) timeout $(( $(left) - 20 )) python3 -m benchmarks.export_cost --tasks ${EC_TASKS:-matmul softmax rmsnorm swiglu} --models ${EC_MODELS:-llama-3-8b qwen2.5-7b} --repeats ${EC_REPEATS:-15} --out benchmarks/results > "$OUT/export_cost.log" 2>&1; echo "rc=$?" >> "$OUT/export_cost.log"; tail -40 "$OUT/export_cost.log" ;;
    hostcost) timeout $(( $(left) - 20 )) python3 benchmarks/host_cost.py --out "$OUT" > "$OUT/host_cost.log" 2>&1; echo "rc=$?" >> "$OUT/host_cost.log" ;;
    launch) timeout $(( $(left) - 20 )) python3 -m benchmarks.launch_bound --runs benchmarks/runs > "$OUT/launch.log" 2>&1; echo "rc=$?" >> "$OUT/launch.log" ;;
    revalidate:*) t=${stage#revalidate:}; KERNELKB_DATA_DIR=/tmp/kkb_revalidate timeout $(( $(left) - 20 )) python3 -m kernelkb revalidate --task "$t" --top ${TOP:-3} --journal "benchmarks/results/revalidate_${t}_h200.jsonl" 2>&1 | grep --line-buffered -v 'Warning\|INFO' | tee -a "$OUT/revalidate.log" ;;
    # the structural variants beside the checked peers: explore candidates, then the winners (~500 s)
    variants) timeout $(( $(left) / 2 )) python3 benchmarks/variants.py explore --budget-s $(( $(left) / 2 - 60 )) --out benchmarks/results > "$OUT/variants.log" 2>&1; timeout $(( $(left) - 20 )) python3 benchmarks/variants.py final --choice benchmarks/results/variants_explore_h200.json --budget-s $(( $(left) - 80 )) --out benchmarks/results >> "$OUT/variants.log" 2>&1 ;;
    confirm) timeout $(( $(left) - 20 )) python3 -m benchmarks.transfer --confirm 2>&1 | grep --line-buffered -v Warning | tail -40 > "$OUT/confirm.log" ;;
  esac
  # after every stage: a later stage the device's time limit cuts still leaves these
  # (files the checkout does not track are gone from the device by the next call)
  tar czf "$OUT/results.tgz" benchmarks/results benchmarks/space benchmarks/sweeps* benchmarks/runs runs_smoke 2>/dev/null
done
tail -5 "$OUT"/*.log 2>/dev/null
