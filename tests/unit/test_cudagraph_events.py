"""Reading CUDA-graph recordings, re-recordings and skips from Inductor's "cudagraphs" log.

The GPU tests (tests/gpu) check this against real CUDA graphs; these pin the parsing of both log
formats (torch 2.11 and 2.13) and the logging hygiene on any machine. The messages below are
copied from those versions' cudagraph_trees.py and cudagraph_utils.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._inductor import cudagraph_trees, cudagraph_utils

from pytest_torchcompile import _compat
from pytest_torchcompile.counting.accounting import Accountant

TREES = cudagraph_trees.log
UTILS = cudagraph_utils.cudagraphs_log
INPUTS_2_11 = "[0]: Tensor(size=[8], stride=(1,), dtype=torch.float32, data_ptr=0x7F4123E00000)"
DYNAMIC_INPUTS = (
    "[0]: Tensor(size=[9], stride=(1,), dtype=torch.float32, data_ptr=0x7F41), [1]: int(9)"
)


def record_2_11(compile_id: str, inputs: str = INPUTS_2_11) -> None:
    TREES.debug(
        "[%s] Recording function=%s, cuda_graph_id=%d, inputs: %s",
        compile_id,
        "partition_0",
        0,
        inputs,
    )


def record_2_13(compile_id: str, inputs: str = INPUTS_2_11) -> None:
    TREES.debug(
        "[%s] Recording function=%s, mode=%s, cuda_graph_id=%d, inputs: %s",
        compile_id, "partition_0", "FORWARD", 1, inputs,
    )  # fmt: skip


def rerecord_2_11(compile_id: str, reason: str) -> None:
    TREES.debug("[%s] Re-recording function=%s, reason=%s", compile_id, "partition_0", reason)


def rerecord_2_13(compile_id: str, reason: str) -> None:
    TREES.debug(
        "[%s] Re-recording function=%s, mode=%s, reason=%s",
        compile_id, "partition_0", "FORWARD", reason,
    )  # fmt: skip


POINTER = "static input data pointer changed.\ninput name: primals_1. data pointer changed"


@pytest.mark.parametrize(
    ("record", "rerecord", "mode"),
    [(record_2_11, rerecord_2_11, "FORWARD"), (record_2_13, rerecord_2_13, "FORWARD")],
)
def test_recordings_and_rerecordings_are_read_in_both_log_formats(record, rerecord, mode) -> None:
    with _compat.cudagraph_events() as events:
        record("0/0")
        rerecord("0/0", POINTER)
        record("0/0")
        record("0/1", DYNAMIC_INPUTS)
    assert events.recordings == [
        _compat.CudagraphRecording("0/0", "partition_0", mode, "", "[8]"),
        _compat.CudagraphRecording(
            "0/0", "partition_0", mode, "static input data pointer changed. input name: primals_1. "
            "data pointer changed", "[8]"
        ),
        _compat.CudagraphRecording("0/1", "partition_0", mode, "", "[9]"),
    ]  # fmt: skip


def test_skipped_cudagraphs_are_read() -> None:
    with _compat.cudagraph_events() as events:
        UTILS.warning("skipping cudagraphs due to mutated inputs (1 instances). Found from :\n  x")
    assert events.skips == ["mutated inputs (1 instances). Found from : x"]


@pytest.fixture
def seen_by_user() -> Iterator[list[logging.LogRecord]]:
    """What a handler the user attached to the CUDA-graph loggers receives."""
    seen: list[logging.LogRecord] = []

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Handler(logging.DEBUG)
    TREES.addHandler(handler)
    UTILS.addHandler(handler)
    yield seen
    TREES.removeHandler(handler)
    UTILS.removeHandler(handler)


def test_the_user_sees_only_what_their_logging_settings_show(seen_by_user) -> None:
    levels = TREES.level, UTILS.level, TREES.getEffectiveLevel()
    assert levels[2] > logging.DEBUG  # as Inductor leaves it unless TORCH_LOGS=cudagraphs
    with _compat.cudagraph_events() as events:
        record_2_13("0/0")
        UTILS.warning("skipping cudagraphs due to cpu device (x)")
    assert len(events.recordings) == 1 and events.skips == ["cpu device (x)"]
    assert [r.levelno for r in seen_by_user] == [logging.WARNING]  # the debug line stayed ours
    assert (TREES.level, UTILS.level, TREES.getEffectiveLevel()) == levels
    assert not TREES.filters and not UTILS.filters


def test_a_user_who_asked_for_the_debug_log_still_gets_it(seen_by_user) -> None:
    before = TREES.level
    TREES.setLevel(logging.DEBUG)
    try:
        with _compat.cudagraph_events() as events:
            record_2_13("0/0")
    finally:
        TREES.setLevel(before)
    assert len(events.recordings) == 1 and len(seen_by_user) == 1


def test_the_accountant_counts_a_graph_recorded_again_with_its_reason() -> None:
    accountant = Accountant()
    with accountant.observe(cudagraphs=True):
        record_2_11("0/0")  # the first recording of a graph is no re-record
        record_2_11("0/1")  # nor is a recompiled graph's, though Inductor names it alike
    assert accountant.counts()["cudagraph_rerecords"] == []
    with accountant.observe(cudagraphs=True):
        record_2_11("0/0", DYNAMIC_INPUTS)  # dynamic shapes: one CUDA graph per size
        rerecord_2_11("0/1", POINTER)
        record_2_11("0/1")
        UTILS.warning("skipping cudagraphs due to mutated inputs (1 instances)")
    rerecords = accountant.counts()["cudagraph_rerecords"]
    assert rerecords == [
        "partition_0 of frame 0 [0/0]: recorded again for inputs of sizes [9]",
        "partition_0 of frame 0 [0/1]: static input data pointer changed. input name: primals_1."
        " data pointer changed",
    ]
    assert accountant.counts()["cudagraph_skips"] == ["mutated inputs (1 instances)"]


class _LogsRecordings(torch.autograd.Function):
    """Logs a recording in forward and in backward, as cudagraph trees does for a graph's pair."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        record_2_11("0/0")
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        record_2_11("0/0")  # torch 2.11 names the backward function like the forward one
        return grad * 2


def test_a_graphs_backward_recording_is_not_a_rerecord_of_its_forward() -> None:
    accountant = Accountant()
    x = torch.ones(3, requires_grad=True)
    with accountant.observe(cudagraphs=True):
        out = _LogsRecordings.apply(x)
    with accountant.observe(cudagraphs=True):
        torch.autograd.grad(out.sum(), x)
    with accountant.observe(cudagraphs=True):
        torch.autograd.grad(_LogsRecordings.apply(x).sum(), x)  # both recorded again
    assert accountant.counts()["cudagraph_rerecords"] == [
        "partition_0 of frame 0 [0/0]: recorded again for inputs of sizes [8]",
        "partition_0 (backward) of frame 0 [0/0]: recorded again for inputs of sizes [8]",
    ]
