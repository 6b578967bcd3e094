"""dynamic_dims: parsing the setting, marking only the compiled side's copies, and size_probes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import find, given, settings
from hypothesis.errors import InvalidArgument

from pytest_torchcompile import strategies as tcst
from pytest_torchcompile.running.marks import mark_inputs
from pytest_torchcompile.settings import SettingError, Settings, apply, from_config


@pytest.mark.parametrize(
    ("value", "normalized", "marks"),
    [
        ("off", "off", None),
        (False, "off", None),
        (True, "backed", (False, None)),
        ("Backed", "backed", (False, None)),
        ("unbacked", "unbacked", (True, None)),
        ("backed: 0, -1", "backed:0,-1", (False, (0, -1))),
        ("unbacked:1", "unbacked:1", (True, (1,))),
    ],
)
def test_values_parse_and_normalize(value, normalized, marks):
    settings = apply(Settings(), {"dynamic_dims": value}, "here")
    assert (settings.dynamic_dims, settings.dim_marks) == (normalized, marks)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("sometimes", r"Invalid dynamic_dims='sometimes' from marker on test_x: expected off, "),
        ("off:0", r"expected off, backed or unbacked"),
        ("backed:x", r"Invalid dynamic_dims='backed:x' .*integers such as backed:0"),
        ("unbacked:", r"integers such as unbacked:0"),
    ],
)
def test_bad_values_say_what_where_and_how(value, message):
    with pytest.raises(SettingError, match=message):
        apply(Settings(), {"dynamic_dims": value}, "marker on test_x")


def test_the_command_line_names_its_flag_and_ini_its_key():
    cli = from_config(
        lambda dest: "unbacked:0" if dest.endswith("dynamic_dims") else None, dict().get
    )
    assert (cli.dynamic_dims, cli.source("dynamic_dims")) == (
        "unbacked:0",
        "--compile-dynamic-dims",
    )
    ini = from_config(lambda dest: None, {"compile_dynamic_dims": "backed"}.get)
    assert ini.source("dynamic_dims") == "ini compile_dynamic_dims"
    with pytest.raises(
        SettingError, match=r"--compile-dynamic-dims='x' from --compile-dynamic-dims"
    ):
        from_config(lambda dest: "x" if dest.endswith("dynamic_dims") else None, dict().get)


def test_the_context_line_names_the_marks_only_when_on():
    assert "dynamic_dims" not in Settings().describe()
    assert "dynamic_dims=unbacked:0" in Settings(dynamic_dims="unbacked:0").describe()


def _marked(tensor: torch.Tensor) -> tuple[set[int], set[int]]:
    return (
        set(getattr(tensor, "_dynamo_dynamic_indices", set())),
        set(getattr(tensor, "_dynamo_unbacked_indices", set())),
    )


def test_backed_marks_skip_the_sizes_dynamo_specializes():
    x, y = torch.randn(5, 1, 3), torch.randn(0, 4)
    mark_inputs(((x,), {"y": y}), (False, None), ((), {}))
    assert _marked(x) == ({0, 2}, set())
    assert _marked(y) == ({1}, set())


def test_unbacked_marks_every_chosen_size_and_negative_dimensions_count_from_the_end():
    x, scalar = torch.randn(1, 0, 3), torch.tensor(2.0)
    mark_inputs([x, scalar, "not a tensor"], (True, (0, -1, 7)), [])
    assert _marked(x) == (set(), {0, 2})  # dimension 7 is not there: left alone
    assert _marked(scalar) == (set(), set())


def test_the_callers_tensors_are_never_marked():
    mine = torch.randn(4, 4)
    mark_inputs((mine,), (False, None), (mine,))
    assert _marked(mine) == (set(), set())


def test_size_probes_shrink_to_the_general_size_then_one_then_zero():
    assert find(tcst.size_probes(), lambda _: True) == ((2,), (1,), (0,))


@settings(max_examples=200, deadline=None)
@given(sizes=tcst.size_probes(max_dims=4, max_numel=64))
def test_size_probes_take_zero_one_and_a_general_size_of_one_dimension(sizes):
    assert len(sizes) == 3 and len({len(shape) for shape in sizes}) == 1
    varying = [d for d in range(len(sizes[0])) if len({shape[d] for shape in sizes}) > 1]
    assert len(varying) == 1
    probed = sorted(shape[varying[0]] for shape in sizes)
    assert probed[:2] == [0, 1] and probed[2] >= 2
    assert all(
        min(shape[d] for shape in sizes) >= 1 for d in range(len(sizes[0])) if d not in varying
    )
    assert all(math.prod(shape) <= 64 for shape in sizes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_dims": 0}, r"min_dims=0 must be an integer >= 1"),
        ({"max_side": 1}, r"max_side=1 leaves no size above 1"),
        ({"max_numel": 1}, r"max_numel=1 leaves no size above 1"),
        ({"min_dims": 3, "max_dims": 2}, r"min_dims=3 is larger than max_dims=2"),
    ],
)
def test_size_probes_refuse_bounds_with_nothing_to_probe(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        tcst.size_probes(**kwargs)
