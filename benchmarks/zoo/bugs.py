"""The 20 planted miscompilations and the zoo program each one is paired with.

Every bug is a torch.compile backend in tests/planted.py (the plugin's own tests use the same
ones): it gets Dynamo's FX graph and example inputs, as any backend does, and returns a callable
that is wrong in one known way. Each is paired with the zoo program where that kind of bug
matters: a layout bug with a model that sees layouts, a state bug with a model that has state.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str  # the backend's name in tests/planted.py
    model: str  # the zoo entry it is paired with (zoo.models.ZOO)
    what: str  # the real compiler bug it stands for

    @property
    def spec(self) -> str:
        """What --compile-backend takes (with tests/ on sys.path, where planted.py lives)."""
        return f"planted:{self.name}"


BUGS: tuple[Bug, ...] = (
    Bug("corrupt_output", "attention", "one output element off by 1e-3: a bad fusion"),
    Bug("change_output_dtype", "attention", "output comes back float64: a promotion bug"),
    Bug("wrong_for_non_contiguous", "attention", "wrong on non-contiguous inputs"),
    Bug("wrong_for_dynamic_shapes", "attention", "wrong in dynamic-shape graphs only"),
    Bug("wrong_output_strides", "attention", "right values, transposed output strides"),
    Bug("wrong_for_size_one", "mlp", "wrong when a dimension is 1: a broadcast special case"),
    Bug("crash_for_empty", "mlp", "raises on an empty batch: a kernel launch on an empty grid"),
    Bug("wrong_after_recompile", "mlp", "the first graph is right, recompiled ones wrong"),
    Bug("wrong_under_no_grad", "mlp", "wrong only for graphs compiled under no_grad (inference)"),
    Bug("corrupt_gradient", "train_step", "forward right, a gradient 1% off"),
    Bug("skip_buffer_update", "conv_bn", "BatchNorm running statistics never updated"),
    Bug("raise_when_compiled", "conv_bn", "compiles, then every compiled call raises"),
    Bug("wrong_for_channels_last", "conv_bn", "wrong on channels_last inputs"),
    Bug("drop_input_mutation", "ema_update", "in-place updates of inputs are lost"),
    Bug("wrong_for_zero_strides", "ema_update", "wrong on expanded (stride 0) inputs"),
    Bug("stale_cache", "ema_update", "returns a cached result for new values of the same shape"),
    Bug("wrong_for_storage_offset", "softmax", "ignores an input's storage offset"),
    Bug("wrong_for_half_precision", "softmax", "wrong in float16 and bfloat16"),
    Bug("wrong_for_non_finite", "softmax", "wrong when an input holds NaN or inf: fast-math"),
    Bug("wrong_tail_unless_multiple_of_16", "softmax", "vectorized by 16 with a wrong tail loop"),
)
