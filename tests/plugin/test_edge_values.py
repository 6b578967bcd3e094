"""Real torch.compile bugs (torch 2.13, CPU Inductor) that only the strategies' edge values reach.

Each input here is one the strategies draw (`Values` of an edge class, rebuilt from its seed), so
the test is the natural property test's failure, made fixed and fast. Each trigger is checked
through a plain ``torch.compile`` first; where this torch no longer has the bug, the case skips
and says so. Where it still has it, the plugin must fail it with the message the boundary and
noise rules give, and pass it on ``aot_eager``: a correct verdict, not a false alarm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from pytest_torchcompile.strategies import TensorSpec, Values, build_tensor

MADE = """
def made(shape, dtype, dist, seed=0, steps=0, grad=False):
    values = Values(dist, seed, steps=steps)
    return build_tensor(TensorSpec(shape, dtype, values=values, requires_grad=grad))
"""


_NAMESPACE: dict[str, Any] = {
    "Values": Values,
    "TensorSpec": TensorSpec,
    "build_tensor": build_tensor,
}
exec(MADE, _NAMESPACE)  # the same helper here, for the plain checks, as in the test file
made: Callable[..., torch.Tensor] = _NAMESPACE["made"]


def _margin(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(a, b, torch.ones_like(a), margin=0.1)


# bug -> (the callable and inputs as source, a plain check that this torch has the bug, what the
# plugin's message must say)
CASES: dict[str, tuple[str, Callable[[], bool], str]] = {
    # Inductor keeps the margin in float32 where eager rounds it to bfloat16: where x1 - x2 is
    # exactly bfloat16(0.1) the hinge's input is 0 in eager (gradient passes) and -1e-4 compiled.
    "margin_ranking_loss": (
        "fn = lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=0.1)\n"
        "args = [made((64,), torch.bfloat16, 'ties', s, steps=0, grad=True) for s in (1, 2)]",
        lambda: _grads_differ(
            _margin, made((64,), torch.bfloat16, "ties", 1), made((64,), torch.bfloat16, "ties", 2)
        ),
        "where eager's value is exact, no rounding moves it",
    ),
    # The same bug given its trigger directly (issue 33): a float64 reference 0 everywhere (the
    # gradient is masked there), and eager's hinge input exactly 0. It passed silently once.
    "margin_ranking_loss_at_its_kink": (
        "fn = lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=0.1)\n"
        "args = [torch.tensor(v, dtype=torch.bfloat16, requires_grad=True)\n"
        "        for v in ([0.10009765625, 0.5], [0.0, 0.25])]",
        lambda: _grads_differ(_margin, *_at_the_kink()),
        "first at index (0,): eager 0.279296875, compiled -0.0, reference -0.0",
    ),
    # Inductor's Welford accumulates float32 in float32, eager in float64.
    "var_at_an_offset": (
        "fn = lambda t: torch.var(t, -1)\n"
        "args = [made((4, 1000), torch.float32, 'offsets', 0, steps=4)]",
        lambda: _outputs_differ(
            lambda t: torch.var(t, -1), made((4, 1000), torch.float32, "offsets", 0, 4), 1e-5
        ),
        "Judged by eager's rounding noise",
    ),
    "std_near_limits": (
        "fn = lambda t: torch.std(t, -1)\nargs = [made((4, 8), torch.float32, 'near_limits', 0)]",
        lambda: _outputs_differ(
            lambda t: torch.std(t, -1), made((4, 8), torch.float32, "near_limits"), 0
        ),
        "NaN/inf in different places",
    ),
    # Inductor folds sum(softmax(x)) to exactly 1.0; eager and float64 land a step below.
    "floor_of_softmax_sums": (
        "fn = lambda t: torch.floor(torch.softmax(t, -1).sum(-1))\n"
        "args = [made((64, 37), torch.float32, 'normal', 0)]",
        lambda: _outputs_differ(
            lambda t: torch.floor(torch.softmax(t, -1).sum(-1)),
            made((64, 37), torch.float32, "normal"),
            0,
        ),
        "compiled is wrong against the float64 reference",
    ),
}


def _at_the_kink() -> list[torch.Tensor]:
    return [torch.tensor(v, dtype=torch.bfloat16) for v in ([0.10009765625, 0.5], [0.0, 0.25])]


def _outputs_differ(fn: Callable[..., torch.Tensor], x: torch.Tensor, rtol: float) -> bool:
    torch.compiler.reset()
    eager, compiled = fn(x), torch.compile(fn, backend="inductor")(x)
    return not torch.allclose(compiled, eager, rtol=rtol, atol=0, equal_nan=True)


def _grads_differ(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor) -> bool:
    torch.compiler.reset()
    grads = []
    for run in (fn, torch.compile(fn, backend="inductor")):
        leaves = [t.detach().requires_grad_() for t in inputs]
        run(*leaves).backward()
        grads.append(torch.cat([t.grad for t in leaves]))
    return not torch.equal(*grads)


def _program(case: str) -> str:
    source = CASES[case][0]
    return (
        "import pytest, torch\nimport torch.nn.functional as F\n"
        "from pytest_torchcompile.strategies import TensorSpec, Values, build_tensor\n"
        + MADE
        + "\n@pytest.mark.compile_parity\ndef test_bug(compile_parity):\n"
        + "".join(f"    {line}\n" for line in source.splitlines())
        + "    compile_parity(fn, *args)\n"
    )


@pytest.mark.parametrize("case", CASES)
def test_the_bug_is_caught_on_inductor_and_passes_on_aot_eager(
    pytester: pytest.Pytester, case: str
) -> None:
    _, reproduces, says = CASES[case]
    if not reproduces():
        pytest.skip(f"torch {torch.__version__} no longer has the {case} bug")
    pytester.makepyfile(_program(case))
    caught = pytester.runpytest_subprocess("--compile-backend=inductor", "-p", "no:cacheprovider")
    caught.assert_outcomes(failed=1)
    assert says in caught.stdout.str()
    clean = pytester.runpytest_subprocess("--compile-backend=aot_eager", "-p", "no:cacheprovider")
    clean.assert_outcomes(passed=1)


NEAR_TIES = """
import pytest, torch
import torch.nn.functional as F

@pytest.mark.compile_parity
@pytest.mark.parametrize("x1, x2, margin", [
    (1.3046875, 0.00390625, 1.3), (0.35546875, -0.01458740234375, 0.37),
])
def test_near_tie(compile_parity, x1, x2, margin):
    fn = lambda a, b: F.margin_ranking_loss(a, b, torch.ones_like(a), margin=margin)
    a, b = ([v, 0.5] for v in (x1, x2))
    b[1] = 0.25
    compile_parity(fn, *(torch.tensor(v, dtype=torch.bfloat16, requires_grad=True) for v in (a, b)))
"""


def test_where_eager_s_own_rounding_lands_on_the_kink_compiled_passes_with_a_note(
    pytester: pytest.Pytester,
) -> None:
    """Eager's bfloat16 x1 - x2 rounds onto the margin (float64's lies past it): compiled keeps
    float64's side, and eager's rounding noise crosses there too. Rounding, said in a note."""
    pytester.makepyfile(NEAR_TIES)
    result = pytester.runpytest_subprocess(
        "--compile-backend=inductor", "-p", "no:cacheprovider", "-rA"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*grad of input 0: outside assert_close's tolerance*excused by eager's rounding noise: "
            "at 1 boundary element(s) eager's rounding noise crosses the boundary too*"
        ]
    )
