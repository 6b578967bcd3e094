"""What an exported program is specialised on, and how a re-export is named as a recompile."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.running import exported
from pytest_torchcompile.running.targets import ModuleTarget
from pytest_torchcompile.settings import SettingError, Settings, apply, marker_settings


def _recompile(before: tuple[object, ...], after: tuple[object, ...]) -> tuple[str, str]:
    fn = ModuleTarget(torch.nn.Linear(3, 2))
    last = exported.signature(fn, before, {})
    now = exported.signature(fn, after, {})
    record = exported.recompile_record("Linear.forward", last, now)
    return record["category"], record["reason"]


@pytest.mark.parametrize(
    ("after", "category", "said"),
    [
        ((torch.ones(4, 3),), "size", "input 0 shape was (2, 3), now (4, 3)"),
        ((torch.ones(3, 2).t(),), "stride", "input 0 strides was (3, 1), now (1, 2)"),
        ((torch.ones(2, 3, dtype=torch.float64),), "dtype", "input 0 dtype was torch.float32"),
        ((torch.ones(2, 3, requires_grad=True),), "requires_grad", "was False, now True"),
        ((torch.ones(2, 3), 2), "python_value", "input 1 was absent, now 2"),
    ],
)
def test_a_re_export_is_named_by_what_changed(after, category, said):
    found_category, reason = _recompile((torch.ones(2, 3),), after)
    assert found_category == category
    assert said in reason, reason


def test_scalars_of_equal_value_but_other_type_are_other_programs():
    fn = ModuleTarget(torch.nn.Linear(3, 2))
    x = torch.ones(2, 3)
    signatures = {tuple(exported.signature(fn, (x, value), {}).items()) for value in (1, 1.0, True)}
    assert len(signatures) == 3


def test_grad_mode_and_training_mode_are_part_of_the_signature():
    sequential = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Dropout())
    model = ModuleTarget(sequential)
    x = torch.ones(2, 3)
    train = exported.signature(model, (x,), {})
    with torch.no_grad():
        no_grad = exported.signature(model, (x,), {})
    sequential[1].eval()
    eval_dropout = exported.signature(model, (x,), {})
    assert train != no_grad and train != eval_dropout
    assert exported.recompile_record("m", train, no_grad)["category"] == "grad_mode"


def test_the_report_says_what_aot_inductor_does_not_compare_and_what_export_ignores():
    assert exported.path_notes(Settings(backend="inductor", mode="max-autotune")) == []
    assert exported.path_notes(Settings(backend="export")) == []
    (aoti,) = exported.path_notes(Settings(backend="aot_inductor"))
    assert "gradients and outputs' requires_grad not compared" in aoti
    (ignored,) = exported.path_notes(Settings(backend="export", dynamic="true"))
    assert ignored.startswith("dynamic=true not applied on backend=export")


def test_a_package_call_counts_its_inputs_and_buffers_as_written():
    """A package writes from C++, unseen by version counters, which the checker reads to keep a
    call's state before it for re-runs; without the bump a float16 in-place update on
    aot_inductor had no float64 reference, and its rounding failed it (examples' ema_update)."""
    average, value, buffer = torch.ones(3), torch.ones(3), torch.zeros(2)

    def package(a, v):
        a.data.add_(v.data)  # as C++ writes it: through no autograd-visible op
        return a.sum()

    before = [t._version for t in (average, value, buffer)]
    exported.LoadedPackage(package, [buffer])(average, v=value)
    assert [t._version for t in (average, value, buffer)] == [v + 1 for v in before]


@pytest.mark.parametrize(
    ("key", "value"), [("compiled_autograd", True), ("dynamic_dims", "backed")]
)
def test_export_paths_refuse_torch_compile_only_settings(key: str, value: object) -> None:
    session = apply(Settings(), {"backend": "aot_inductor"}, "--compile-backend")
    with pytest.raises(SettingError, match=rf"Invalid {key}=.* from marker on test_x: backend="):
        marker_settings(session, (), {key: value}, "test_x")
