"""The OpInfo false-alarm benchmark (benchmarks/opinfo.py) on a small fixed subset of op_db.

Each case runs an op's first samples through `assert_compile_parity` at its defaults and asserts
that none is a plugin false alarm or a plugin crash. The sparse, wrapped-exception and non-finite
cases were issue 10's false alarms and crashes (strict xfails until the fix landed). The full
sweep is `python benchmarks/opinfo.py` (minutes; see BENCHMARKS.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import opinfo_check

op_db, SampleInput = opinfo_check.load_op_db()
OPS = {opinfo_check.full_name(op): op for op in op_db}
BAD = ("false-alarm", "crash", "harness")


AOT_EAGER = [
    "abs",
    "add",
    "sum",
    "cumsum",
    "softmax",
    "where",
    "clamp",
    "matmul",
    "max.reduction_with_dim",
    "sort",
    "index_add",
    "scatter_add",
    "nn.functional.conv2d",
    "nn.functional.layer_norm",
    "nn.functional.batch_norm",
    "nn.functional.cross_entropy",
    "linalg.svd",
    "narrow",  # a fallback verdict (data-dependent op), not a false alarm
    "sparse.mm.reduce",
    "sparse.sampled_addmm",
]
# One sample each: an Inductor compile costs seconds.
INDUCTOR = ["add", "nn.functional.layer_norm"]


# Inputs eager rejects: the checker must re-raise eager's exception (exception parity).
ERROR_INPUTS = [
    "index_select",
    "narrow_copy",  # #1 is a real divergence: eager RuntimeError, the meta kernel IndexError
    "cat",
    "nn.functional.l1_loss",
]


def _bad_records(
    name: str,
    backend: str,
    samples: int = 2,
    kind: str = "sample",
    dtype: torch.dtype = torch.float32,
) -> list[str]:
    records = opinfo_check.check_op(OPS[name], dtype, "cpu", backend, samples, kind)
    assert records, name
    return [
        f"{r.outcome}: #{r.sample} {r.reason} {r.evidence}" for r in records if r.outcome in BAD
    ]


@pytest.mark.parametrize("name", AOT_EAGER)
def test_no_false_alarm_on_aot_eager(name: str) -> None:
    assert _bad_records(name, "aot_eager") == []


@pytest.mark.parametrize("name", ERROR_INPUTS)
def test_no_false_alarm_on_error_inputs(name: str) -> None:
    assert _bad_records(name, "aot_eager", kind="error_inputs") == []


@pytest.mark.parametrize("name", INDUCTOR)
def test_no_false_alarm_on_inductor(name: str) -> None:
    assert _bad_records(name, "inductor", samples=1) == []


def test_no_false_alarm_where_eager_overflows_and_inductor_matches_float64() -> None:
    assert _bad_records("pow", "inductor", samples=1, kind="extremal", dtype=torch.float16) == []


def test_a_planted_wrong_output_is_a_divergence_not_a_false_alarm() -> None:
    records = opinfo_check.check_op(OPS["add"], torch.float32, "cpu", "planted:corrupt_output", 1)
    assert [r.outcome for r in records] == ["divergence"], records


# Eager rejects a batch of one in training; Dynamo raises TorchRuntimeError around that ValueError.
BATCH_OF_ONE = SampleInput(torch.randn(1, 3), args=(None, None), kwargs={"training": True})


def test_no_false_alarm_when_compiled_wraps_eagers_exception() -> None:
    op = OPS["nn.functional.batch_norm"]
    record = opinfo_check.check_sample(op, 0, BATCH_OF_ONE, torch.float32, "cpu", "aot_eager")
    assert record.outcome == "eager-invalid", record


def test_the_oracle_sees_through_dynamos_wrapper() -> None:
    fn = opinfo_check.callable_for(OPS["nn.functional.batch_norm"], BATCH_OF_ONE)
    inputs = ((BATCH_OF_ONE.input, *BATCH_OF_ONE.args), BATCH_OF_ONE.kwargs)
    outcome, evidence = opinfo_check.judge(fn, inputs, "aot_eager", cotangents=False)
    assert (outcome, evidence) == (
        "false-alarm",
        "same exception under a wrapper: TorchRuntimeError(ValueError)",
    )


def test_selection_filters_by_pattern_and_spreads() -> None:
    sys.path.insert(0, str(Path(opinfo_check.__file__).parent))
    import opinfo

    names = ["abs", "add", "nn.functional.relu", "nn.functional.gelu", "sum"]
    assert opinfo.select(names, ["nn.functional.*"], None, 1) == [2, 3]
    assert opinfo.select(names, [], 2, 2) == [0, 2]
