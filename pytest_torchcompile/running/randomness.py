"""Random draws: compiled as the user compiles, compared under `fallback_random` where needed.

Eager and compiled can only draw the same random numbers when Inductor runs ATen's own random
kernels (`torch._inductor.config.fallback_random=True`); its default RNG lowering draws other
numbers. But the setting changes what is compiled (decompositions, strides, dtype promotion of
random ops), so it is switched on only for graphs that draw random numbers, and a callable with
such a graph is compiled a second time exactly as the user compiles it. That second compile is
judged on what the random stream cannot change: whether it raises (and what), and the metadata
of every output, state and gradient leaf. A finding seen only with the checker's setting says so.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from pytest_torchcompile import _compat

FALLBACK_RANDOM = "torch._inductor.config.fallback_random=True"
ONLY_WITH_FALLBACK_RANDOM = (
    f"only with {FALLBACK_RANDOM}, which the checker sets to compare random draws"
)

# torch-level functions that draw random numbers though no ATen operator of their name does:
# Dynamo keeps them in its graph as calls, and AOTAutograd traces them into random ATen ops.
_DRAWING_FUNCTIONS = frozenset(
    {
        "gumbel_softmax",
        "fractional_max_pool2d",
        "fractional_max_pool3d",
        "fractional_max_pool2d_with_indices",
        "fractional_max_pool3d_with_indices",
        "multi_head_attention_forward",
    }
)
_GRAPH_CALLS = frozenset({"call_function", "call_method"})
_DROPOUTS = (
    torch.nn.Dropout,
    torch.nn.Dropout1d,
    torch.nn.Dropout2d,
    torch.nn.Dropout3d,
    torch.nn.AlphaDropout,
    torch.nn.FeatureAlphaDropout,
)


def draws_random(gm: torch.fx.GraphModule) -> bool:
    """Whether a Dynamo graph (or a subgraph of a higher-order op in it) draws random numbers.

    Conservative: a miss would compare Inductor's own random numbers against eager's, a false
    alarm; an extra hit only costs a second compile. An op draws when it is an ATen operator
    tagged `nondeterministic_seeded` (the tag Inductor reads), a torch function or Tensor method
    of such an operator's name (`torch.rand`, `Tensor.uniform_`, `F.dropout`), or a known
    composite that draws inside (`F.gumbel_softmax`); unless a literal argument rules the draw
    out (dropout with `training=False` or `p=0`, `rrelu` outside training, attention and
    multi-head attention without dropout).
    """
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            if _module_draws(module):
                return True
            continue
        for node in module.graph.nodes:
            if node.op in _GRAPH_CALLS and _call_draws(node):
                return True
    return False


def _module_draws(module: torch.nn.Module) -> bool:
    """A module Dynamo left as a call_module (it inlines most): dropout and RReLU in training."""
    if isinstance(module, _DROPOUTS):
        return module.training and module.p != 0
    return isinstance(module, torch.nn.RReLU) and module.training


def _call_draws(node: torch.fx.Node) -> bool:
    target = node.target
    tagged = _compat.tagged_random(target)
    if tagged is not None:
        return tagged
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if not isinstance(name, str):
        return False
    if "dropout" in name and "attention" not in name:
        return not (_literal(node, "training", 2, "train") is False or _literal(node, "p", 1) == 0)
    if name in ("rrelu", "rrelu_"):
        return _literal(node, "training", 3, default=False) is not False
    if name == "scaled_dot_product_attention":
        return bool(_literal(node, "dropout_p", 4, default=0.0) != 0)
    if name == "multi_head_attention_forward":  # nn.MultiheadAttention: dropout inside
        training = _literal(node, "training", 13, default=True)
        return not (training is False or _literal(node, "dropout_p", 10) == 0)
    return bool(name in _DRAWING_FUNCTIONS or name in _compat.nondeterministic_seeded_op_names())


def _literal(
    node: torch.fx.Node, keyword: str, position: int, alias: str = "", default: Any = None
) -> Any:
    """The argument's value where the graph holds it as a constant, else None (unknown)."""
    if keyword in node.kwargs:
        value = node.kwargs[keyword]
    elif alias and alias in node.kwargs:
        value = node.kwargs[alias]
    elif len(node.args) > position:
        value = node.args[position]
    else:
        value = default
    return None if isinstance(value, torch.fx.Node) else value


class RandomAwareBackend:
    """The backend torch.compile gets (inside the accountant's): each graph that draws random
    numbers is compiled with `fallback_random` on, every other graph exactly as the user's.

    `drew` becomes True when a random graph is compiled; the checker reads and clears it per
    compiled call. Other attributes come from the user's backend, so Dynamo sees that backend.
    """

    def __init__(self, user: Callable[..., Any], random: Callable[..., Any]) -> None:
        self.user = user
        self._random = random
        self.drew = False
        self.__name__ = str(getattr(user, "compiler_name", getattr(user, "__name__", user)))

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if draws_random(gm):
            self.drew = True
            return self._random(gm, example_inputs)
        return self.user(gm, example_inputs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("user", "_random"):
            raise AttributeError(name)
        return getattr(self.user, name)

    def __repr__(self) -> str:
        return f"<backend with fallback_random on random graphs around {self.user!r}>"


def own_code(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a function with its own code object, so that Dynamo's cache for the user-config
    compile is separate from the checked compile's (its entries would otherwise count towards
    the same recompile limit). Other callables are returned as they are."""
    if not isinstance(fn, types.FunctionType):
        return fn
    copied = types.FunctionType(
        fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copied.__kwdefaults__ = fn.__kwdefaults__
    copied.__qualname__ = fn.__qualname__
    return copied


def as_user_failure(message: str, user_setting: bool) -> str:
    """The message of a divergence seen in the compile made as the user makes it."""
    return (
        "Compiled as you compile it (torch._inductor.config.fallback_random="
        f"{user_setting}, your own config), the call differs from eager in what random draws "
        "cannot change (raising, and the dtype, shape, strides, device and requires_grad of "
        f"each leaf):\n\n{message}"
    )


def fallback_random_failure(message: str, metadata_differs: bool) -> str:
    """The message of a divergence seen where the checker compiled with fallback_random on and
    the compile made as the user makes it agrees with eager on everything it can be judged on.

    `metadata_differs`: the divergence is one of raising or metadata, which the user's compile
    shows none of, so it is the checker's setting's alone.
    """
    if metadata_differs:
        lead = (
            f"Seen {ONLY_WITH_FALLBACK_RANDOM}: compiled as you compile it, the call raises as "
            "eager does and every leaf's metadata matches eager's."
        )
    else:
        lead = (
            f"Seen with {FALLBACK_RANDOM}, which the checker sets to compare random draws (the "
            "graph draws random numbers): compiled as you compile it, the call raises as eager "
            "does and every leaf has eager's metadata, but its random draws differ from eager's, "
            "so its values cannot be compared there."
        )
    return f"{lead}\n\n{message}"
