"""Running a call: the snapshot every re-run is rebuilt from, the eager and compiled sides, the
exported path, randomness, Python state and stand-ins, the marks and caches a check sets up, and
the calls the runner hands them; each side's result is a record of this stage.
"""
