"""After a failure: the stage bisect (triage), and the standalone repro and its replay."""
