"""Running a call: the snapshot every re-run is rebuilt from, the walks into a call's values
(trees), the eager and compiled sides, the exported path, randomness, Python state and stand-ins,
the rounding-noise runs, the marks and caches a check sets up, faults of the environment told from
the compiler's, which calls are checked (selection), and the calls the runner hands them; each
side's result is a record of this stage.
"""
