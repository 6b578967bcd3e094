"""Running a call: the call's kind (a module or a function: targets.py), the snapshot every re-run is
rebuilt from, the world around a call, the walks into a call's values (trees), the eager and
compiled sides (the compiler, the module copies, the as-you-compile-it run, the session's
compiles), the exported path, randomness and Python state, the rounding-noise runs, the marks a
check sets up, faults of the environment told from the compiler's, the inputs' signature, and the
calls the runner hands them; each side's result is a record of this stage.
"""
