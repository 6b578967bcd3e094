"""The pure parts of interception: class selection by pattern and the call signature."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.adoption.selection import Selection, module_structure
from pytest_torchcompile.running.signatures import Skip, inputs_signature
from pytest_torchcompile.settings import SettingError, session_from_config


@pytest.mark.parametrize(
    ("selection", "name", "reason"),
    [
        (Selection(), "pkg.models.Net", None),
        (
            Selection(include=("torch.nn.*",)),
            "pkg.models.Net",
            "not matched by --compile-parity-include",
        ),
        (Selection(include=("Net",)), "pkg.models.Net", None),  # the bare class name matches too
        (Selection(exclude=("pkg.*",)), "pkg.models.Net", "matched by --compile-parity-exclude"),
        (
            Selection(exclude=("Dropout",)),
            "torch.nn.modules.dropout.Dropout",
            "matched by --compile-parity-exclude",
        ),
    ],
)
def test_selection_by_qualified_or_class_name(selection, name, reason):
    assert selection.skips(name) == reason


def test_signature_tells_shapes_layouts_and_python_values_apart():
    x = torch.ones(2, 3)
    assert inputs_signature((x,)) == inputs_signature((torch.zeros(2, 3),))
    assert inputs_signature((x,)) != inputs_signature((x.t(),))
    assert inputs_signature((x, 1)) != inputs_signature((x, 2))
    assert inputs_signature({"x": x}) != inputs_signature({"y": x})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (torch.ones(2, device="meta"), "meta tensors hold no values to compare"),
        (
            torch.fx.Proxy(torch.fx.Graph().placeholder("x")),
            "called during torch.fx symbolic tracing",
        ),
    ],
)
def test_inputs_the_replay_cannot_use_are_skipped(value, reason):
    with pytest.raises(Skip, match=reason):
        inputs_signature((value,))


def test_patterns_parse_from_commas_and_spaces():
    options = {"torchcompile_parity_include": "torch.nn.*, Block", "torchcompile_parity": "all"}
    session = session_from_config(options.get, lambda name: "")
    assert session.parity_include == ("torch.nn.*", "Block")
    assert session.parity == "all"
    with pytest.raises(SettingError, match="Invalid --compile-parity-exclude=' , '"):
        session_from_config({"torchcompile_parity_exclude": " , "}.get, lambda name: "")


def _mlp(*extra: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Softplus(), torch.nn.Linear(4, 1), *extra
    )


def test_structure_tells_parameter_free_layers_apart():
    assert module_structure(_mlp()) == module_structure(_mlp())
    assert module_structure(_mlp()) != module_structure(_mlp(torch.nn.Sigmoid()))
    other = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    assert module_structure(_mlp()) != module_structure(other)


def test_structure_tells_layer_settings_apart():
    assert module_structure(torch.nn.Softplus(beta=2.0)) != module_structure(torch.nn.Softplus())
    strided = torch.nn.Conv2d(1, 2, 3, stride=2)
    assert module_structure(strided) != module_structure(torch.nn.Conv2d(1, 2, 3))


def test_structure_tells_frozen_parameters_apart():
    frozen = _mlp()
    frozen[0].requires_grad_(False)
    assert module_structure(frozen) != module_structure(_mlp())


def test_structure_ignores_the_training_flag_the_call_signature_reads_live():
    assert module_structure(_mlp().eval()) == module_structure(_mlp())
