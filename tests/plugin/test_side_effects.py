"""Python side effects the call makes are part of parity: containers the callable reaches,
plain attributes of modules and of objects among the arguments."""

from __future__ import annotations


def test_a_dropped_append_to_a_container_in_a_closure_fails_naming_it(pytester):
    # pytorch/pytorch#197896, still in torch 2.13: a method of a class defined in the enclosing
    # scope appends to a closure list; the compiled run never does.
    pytester.makepyfile(
        """
        import pytest, torch

        def make():
            state = []

            class Helper:
                def touch(self):
                    state.append(1)

            def f(x):
                Helper().touch()
                return x + 1

            return f, state

        @pytest.mark.compile_parity(fullgraph=True)
        def test_it(compile_parity):
            f, state = make()
            compile_parity(f, torch.ones(2))
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ParityError*",
            "*closure variable 'state' after the call*eager has 1 elements, compiled has 0*",
        ]
    )


def test_containers_and_attributes_updated_alike_pass_and_end_as_eager_left_them(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        LOG = []
        COUNTS = {"calls": 0}

        class Counting(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(2, 2)
                self.calls = 0
                self.sizes = []

            def forward(self, x):
                self.calls += 1
                self.sizes.append(x.shape[0])
                LOG.append("forward")
                COUNTS["calls"] += 1
                return self.lin(x)

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            model = Counting()
            compile_parity(model, torch.ones(3, 2))
            compile_parity(model, torch.ones(3, 2))
            # the caller's objects hold what two plain calls leave, not four
            assert model.calls == 2 and model.sizes == [3, 3]
            assert LOG == ["forward", "forward"] and COUNTS == {"calls": 2}
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)


def test_a_dropped_attribute_update_on_an_argument_fails_naming_it(pytester):
    # A planted divergence without a planted backend: the update is skipped where Dynamo traces
    # the function (and so in the compiled program), as a side effect a compiler drops would be.
    pytester.makepyfile(
        """
        import pytest, torch

        class Stats:
            def __init__(self):
                self.seen = 0

        def f(stats, x):
            if not torch.compiler.is_compiling():
                stats.seen += 1
            return x * 2

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            stats = Stats()
            compile_parity(f, stats, torch.ones(2))
        """
    )
    result = pytester.runpytest("--compile-backend=eager")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*input 0.seen after the call: eager has 1, compiled has 0*"])


def test_a_module_level_object_among_the_inputs_is_shared_and_put_back_before_each_run(pytester):
    # Copies share it (identity with module level holds), so the compiled side's update lands on
    # it: it is put back before eager runs, and both sides are judged from the same state.
    pytester.makepyfile(
        """
        import pytest, torch

        class Stats:
            def __init__(self):
                self.seen = 0
                self.log = []

        STATS = Stats()

        def f(stats, x):
            stats.seen += 1
            stats.log.append(stats.seen)
            return x * stats.seen

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(f, STATS, torch.ones(2))
            compile_parity(f, STATS, torch.ones(2))
            assert (STATS.seen, STATS.log) == (2, [1, 2])  # as two plain calls leave it
        """
    )
    result = pytester.runpytest("--compile-backend=aot_eager")
    result.assert_outcomes(passed=1)


def test_a_memo_only_eager_fills_with_type_keys_is_compared_on_neither_side(pytester):
    # tensordict's _TENSOR_COLLECTION_MEMO on the GPU host: memoized by type, and only when not
    # compiling. At a worker's first call the compiled side left it empty (plain, compared) and
    # eager left it keyed by a class (not plain, not compared): "present in compiled only".
    pytester.makepyfile(
        """
        import pytest, torch

        MEMO = {}

        def is_tensor(value):
            if torch.compiler.is_compiling():
                return isinstance(value, torch.Tensor)
            found = MEMO.get(type(value))
            if found is None:
                found = MEMO[type(value)] = isinstance(value, torch.Tensor)
            return found

        def double(x):
            return x * 2 if is_tensor(x) else x

        @pytest.mark.compile_parity
        def test_it(compile_parity):
            compile_parity(double, torch.ones(3))
            assert MEMO == {torch.Tensor: True}
        """
    )
    pytester.runpytest("--compile-backend=aot_eager").assert_outcomes(passed=1)
