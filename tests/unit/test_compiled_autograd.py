"""compiled_autograd: the setting, and how compiled autograd's graphs are counted and put away."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.runner import Checker, isolated
from pytest_torchcompile.settings import SettingError, Settings, apply, from_config


def test_the_marker_key_the_flag_and_the_ini_key():
    assert apply(Settings(), {"compiled_autograd": "yes"}, "here").compiled_autograd is True
    cli = from_config(lambda d: True if d.endswith("compiled_autograd") else None, dict().get)
    assert (cli.compiled_autograd, cli.source("compiled_autograd")) == (True, "--compile-autograd")
    ini = from_config(lambda d: None, {"compile_autograd": "true"}.get)
    assert ini.source("compiled_autograd") == "ini compile_autograd"
    with pytest.raises(SettingError, match=r"Invalid compiled_autograd='maybe' from marker on t"):
        apply(Settings(), {"compiled_autograd": "maybe"}, "marker on t")
    assert "compiled_autograd=True" in Settings(compiled_autograd=True).describe()
    assert "compiled_autograd" not in Settings().describe()


def _counts(model: torch.nn.Module, batches: tuple[int, ...], **options: object):
    checker = Checker(apply(Settings(), {"backend": "aot_eager", **options}, "here"))
    with isolated(checker.accountant):
        for batch in batches:
            checker.check(model, (torch.randn(batch, 4, requires_grad=True),), {})
        return checker.accountant.counts()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())


def test_each_captured_backward_is_a_graph_of_its_own_frame():
    counts = _counts(_model(), (5, 5), compiled_autograd=True)
    frames = [graph["frame"] for graph in counts["graphs"]]
    assert frames[1:] == ["compiled autograd backward !0"]  # the second call hit both caches
    assert counts["recompiles"] == []
    assert [g["frame"] for g in _counts(_model(), (5,))["graphs"]] == frames[:1]


def test_a_backward_captured_again_for_new_sizes_is_a_recompile():
    # 5 -> 7: the forward recompiles with a dynamic batch and the backward is captured anew
    # after it (one recompile); 7 -> 9: only compiled autograd's cache misses on the size.
    recompiles = _counts(_model(), (5, 7, 9), compiled_autograd=True)["recompiles"]
    frames = [r["frame"] for r in recompiles]
    assert frames[0].startswith("Sequential.forward")
    assert frames[1] == "compiled autograd backward !2"
    assert "compiled autograd captured this backward again" in recompiles[1]["reason"]
    assert len(recompiles) == 2
    assert len(_counts(_model(), (5, 7, 9))["recompiles"]) == 1  # without it: the forward's


def test_another_backward_is_no_recompile():
    checker = Checker(apply(Settings(), {"backend": "aot_eager", "compiled_autograd": True}, "x"))
    with isolated(checker.accountant):
        checker.check(lambda x: x.sin(), (torch.randn(5, 4, requires_grad=True),), {})
        checker.check(lambda x: x.tanh(), (torch.randn(5, 4, requires_grad=True),), {})
        counts = checker.accountant.counts()
    assert counts["recompiles"] == []
    assert sum(g["frame"].startswith("compiled autograd") for g in counts["graphs"]) == 2


def test_compiled_autograd_is_off_again_after_each_check():
    from torch._dynamo import compiled_autograd, utils

    _counts(_model(), (5,), compiled_autograd=True)
    assert not compiled_autograd.compiled_autograd_enabled
    assert torch.autograd.is_multithreading_enabled()
    captures = utils.counters["compiled_autograd"]["captures"]
    x = torch.randn(3, 4, requires_grad=True)
    _model()(x).sum().backward()  # a plain backward after the check: no capture
    assert utils.counters["compiled_autograd"]["captures"] == captures


def _captured_graph(number: int) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("inputs")
    graph.output(graph.call_function(torch.ops.aten.mul.Tensor, (x, x)))
    return torch.fx.GraphModule(torch.nn.Module(), graph, f"CompiledAutograd{number}")


def test_a_capture_after_a_cache_reset_is_no_recompile():
    from pytest_torchcompile.counting.accounting import Accountant

    accountant = Accountant()
    compiler = accountant.autograd_compiler(lambda gm: gm)
    compiler(_captured_graph(0))
    compiler(_captured_graph(1))  # the same operators again: a recompile of that backward
    assert [r["frame"] for r in accountant.counts()["recompiles"]] == [
        "compiled autograd backward !1"
    ]
    accountant.forget_captures()  # a fresh compile cache (under Hypothesis)
    compiler(_captured_graph(2))
    assert len(accountant.counts()["recompiles"]) == 1
