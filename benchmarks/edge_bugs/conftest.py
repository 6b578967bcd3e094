"""Whether a natural test catches a bug, not its shrunk input: ``--hypothesis-profile=noshrink``
skips shrinking (each shrink step is an Inductor recompile)."""

from hypothesis import Phase, settings

settings.register_profile("noshrink", phases=[Phase.explicit, Phase.generate], database=None)
