"""After a failure: the stage bisect (triage), the standalone repro and its replay, and the faults
that belong to the environment, not to the compiler.
"""
