"""The pure parts of triage: stage lines (triage.py), what the Recorder keeps (recorder.py),
rebuilding callables from source (repro.py)."""

from __future__ import annotations

import pytest
import torch

from pytest_torchcompile.after_failure import repro, triage
from pytest_torchcompile.after_failure.triage import stage_backends, stage_line
from pytest_torchcompile.running.recorder import Recorder
from pytest_torchcompile.settings import Settings


def test_the_stages_end_with_the_configured_backend():
    assert stage_backends("inductor") == [
        "eager",
        "aot_eager",
        "aot_eager_decomp_partition",
        "inductor",
    ]
    assert stage_backends("aot_eager") == ["eager", "aot_eager"]
    assert stage_backends("mypkg.backends:mine")[-1] == "mypkg.backends:mine"


def test_the_stage_line_names_the_first_stage_that_diverges():
    ok = [("eager", False), ("aot_eager", False), ("aot_eager_decomp_partition", False)]
    assert stage_line([*ok, ("inductor", True)]) == (
        "stage: Dynamo OK, AOTAutograd OK, decompositions OK -> TorchInductor diverges"
    )
    assert stage_line([("eager", False), ("aot_eager", True)]) == (
        "stage: Dynamo OK -> AOTAutograd diverges"
    )
    assert stage_line([("eager", True)]) == "stage: Dynamo diverges (the first stage)"
    assert stage_line([*ok, ("mypkg:mine", True)]).endswith("-> mypkg:mine diverges")


def test_the_recorder_copies_inputs_every_call_and_a_module_once():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    recorder = Recorder()
    recorder.record(model, (x[::2],), {})
    with torch.no_grad():
        model.weight.add_(1)  # a later change to the caller's module: not what was recorded
        x.add_(1)
    recorder.record(model, (x,), {"scale": 2.0})
    first, second = recorder.calls
    assert first.fn is second.fn and first.fn is not model  # one copy, shared by both calls
    assert not torch.equal(first.fn.weight, model.weight)
    assert first.args[0].stride() == (6, 1) and not torch.equal(second.args[0], first.args[0])
    assert second.kwargs == {"scale": 2.0} and not any(c.diverged for c in recorder.calls)
    recorder.diverged()
    assert second.diverged


def test_a_lambda_is_rebuilt_from_its_own_source_with_what_it_closes_over():
    scale = 3.0
    pair = (lambda t: t + 1, lambda t: torch.relu(t) * scale)
    code, imports, captured = repro.rebuild_source(pair[1], "make_fn_0")
    assert "return lambda t: torch.relu(t) * scale" in code
    assert code.startswith("def make_fn_0(scale):")
    assert (imports, captured) == ({"import torch"}, {"scale": 3.0})
    namespace: dict[str, object] = {"torch": torch}
    exec(code, namespace)  # the generated repro code itself
    rebuilt = namespace["make_fn_0"](**captured)
    x = torch.randn(5)
    assert torch.equal(rebuilt(x), pair[1](x))


def test_a_nested_function_loses_its_decorators_and_keeps_its_name():
    def passthrough(fn):
        return fn

    @passthrough
    def double(t):
        return t * 2

    code, _, captured = repro.rebuild_source(double, "make_fn_1")
    assert "@passthrough" not in code and "def double(t):" in code
    assert code.rstrip().endswith("return double") and captured == {}


def test_directory_names_are_safe_and_distinct():
    assert triage.directory_name("tests/test_x.py::test_y[cpu-float32]") == (
        "tests_test_x.py__test_y_cpu-float32"
    )


class _Holder:
    """An object pickle refuses: it holds an open generator and refers back to itself."""

    def __init__(self) -> None:
        self.weight = torch.arange(3.0)
        self.gen = (i for i in range(3))
        self.me = self
        self.scale = lambda t: t * 2


def test_what_pickle_refuses_is_saved_as_stand_ins_and_resolved_back(tmp_path):
    import io

    from pytest_torchcompile.after_failure.standins import Placeholder, resolve

    holder = _Holder()
    saver = repro.InputSaver({__name__})
    saved = saver.save(lambda t: holder.scale(t) + holder.weight, "fn")
    buffer = io.BytesIO()
    torch.save(saved, buffer)  # what calls.pt holds
    buffer.seek(0)
    namespace: dict[str, object] = {"torch": torch}
    exec("\n\n".join(saver.code), namespace)
    makers = {name: namespace[name] for name in saver.makers.values()}
    fn = resolve(torch.load(buffer, weights_only=False), makers, {})
    assert torch.equal(fn(torch.ones(3)), torch.tensor([2.0, 3.0, 4.0]))
    rebuilt = fn.__closure__[0].cell_contents
    assert type(rebuilt) is _Holder and rebuilt.me is rebuilt
    assert isinstance(rebuilt.gen, Placeholder)
    assert saver.notes == [
        "test_what_pickle_refuses_is_saved_as_stand_ins_and_resolved_back.<locals>.<lambda>: "
        "holder.gen could not be saved (a generator: TypeError: cannot pickle 'generator' object);"
        " repro.py holds a placeholder for it that raises if the replay uses it"
    ]
    with pytest.raises(RuntimeError, match=r"holder\.gen could not be saved"):
        rebuilt.gen.send(None)


def test_a_repro_that_agrees_in_a_fresh_cache_names_the_sessions_inductor_cache(
    tmp_path, monkeypatch, capsys
):
    # A divergence can come from a graph Inductor's cache served, compiled for another module
    # (monai's stored attention matrix: a cached backward): the repro then agrees in a fresh
    # cache, and says where the session's cache was and how to run it there.
    session_cache = str(tmp_path / "session-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", session_cache)
    recorder = Recorder()
    recorder.record(torch.nn.Linear(3, 2), (torch.randn(4, 3),), {})
    out = tmp_path / "repro"
    out.mkdir()
    repro.write_repro(out, recorder.calls, Settings(backend="inductor"), False, "t", "")
    assert f"SESSION_CACHE = {session_cache!r}" in (out / "repro.py").read_text()
    for cache, noted in ((str(tmp_path / "fresh"), True), (session_cache, False)):
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", cache)
        # aot_eager agrees, as the fresh Inductor compile did, and keeps the test fast
        assert (
            repro.run_repro(out / "calls.pt", {"backend": "aot_eager"}, {}, None, session_cache)
            == 0
        )
        printed = capsys.readouterr().out
        assert "the bug is gone" in printed
        assert (f"TORCHINDUCTOR_CACHE_DIR={session_cache} python" in printed) is noted, printed
