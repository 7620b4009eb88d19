"""The optimization loop: an agent proposes an edit, the sandbox judges it, the verdict
and its feedback become an experience.

``session.optimize`` runs a task regime by regime; ``loop`` runs the rounds (recall from
the store, propose, evaluate, judge, write back); ``agents`` (offline, tuner, LLM) make
the proposals; ``sandbox`` runs a candidate in a jailed worker and decides the result in
a judge process the candidate cannot reach; ``report``, ``export`` and ``run_file`` leave
the run's folder under the store's home.
"""
