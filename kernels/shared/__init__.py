"""The floor every layer stands on: facts and vocabulary with one copy each, in the
standard library only, so the sandbox's worker imports them on a bare GPU host.

``gpus`` (the GPU table and architecture families: datasheet ceilings, shared memory per
block), ``vocabulary`` (edit and knob categories, verdicts, round and proposal kinds, dtype
names), ``stats`` (geomean), ``hashing`` (the source hash), ``launch`` (a configuration's
launch facts), ``errors`` (the errors a user can fix, and how a message quotes a value),
``folders`` (the per-user data and cache folders, by platformdirs), ``atomic`` (a file
replaced whole or not at all)."""
