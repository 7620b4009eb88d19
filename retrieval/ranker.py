"""A learned cost model that orders candidate configurations for (task, GPU, shape).

Public API (what bootstrap, the offline agent and the benchmarks code against)::

    from retrieval.ranker import CostModel, RankedConfig, candidate_rows, rows_from_records

    rows = rows_from_records(records, launch_of)      # ExperienceRecords -> ExperienceRow
    model = CostModel().fit(rows)                      # measured rows, many ops and GPUs
    cands = candidate_rows("softmax", configs, shapes, target_facts, launch_of_config)
    ranked = model.rank(cands)                         # list[RankedConfig], best first
    ranked[0].config, ranked[0].predicted_rel_time     # e.g. {...}, 1.07 (x the best)
    ranked[0].evidence                                 # list[Neighbour]: the same config on
                                                       # other GPUs, rel time and rank there
    model.update(measured_rows)                        # the target's own measurements
    ranked = model.rank(cands)                         # re-ordered with them

- ``launch_of(record, shape_label) -> Launch | None`` is injected by the caller (retrieval
  may not import kernels): for a Triton task ``lambda r, s: task.launch(r.edit.config,
  parse(s))``; for imported Kernel Tuner data ``retrieval.launch.kernel_tuner_launch``.
- ``ExperienceRow``: op, shape label, GPU name, config, measured time (None = failed), the
  launch facts, the GPU facts and the shape's bytes / flops. ``candidate_rows`` builds the
  same rows without a time for the configurations to rank on the target GPU.
- ``RankedConfig(config, predicted_rel_time, score, evidence)``: ``predicted_rel_time`` is
  the model's estimate of time / best time on the target (geomean over the shapes).
"""
