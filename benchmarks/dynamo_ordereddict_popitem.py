"""Dynamo pops the last item where a copied module-level OrderedDict is asked for its first
(`popitem(last=False)`; torch 2.13, CPU): the copy becomes a plain dict variable, whose
`popitem` ignores `last`. A locally built OrderedDict is handled right.

    python benchmarks/dynamo_ordereddict_popitem.py   # exits 1 while compiled differs

Found on torchquad 0.5.0 by the peer (each test compiled whole, as PyTorch CI compiles its own):
18 of its 36 torch tests fail on `aot_eager` and `inductor`. autoray 0.11's `translate_wrapper`
maps positional arguments to torch's keywords with `translator.copy().popitem(last=False)`, so
compiled calls `torch.amin(keepdim=x)` ("missing 1 required positional arguments: 'input'").
Zero-change mode reaches it only where a checked function calls autoray: torchquad's
integrators are classes, which `--compile-parity-functions` lists, not wraps."""

import sys
from collections import OrderedDict

import torch

TRANSLATOR = OrderedDict([("a", ("input",)), ("axis", ("dim",)), ("keepdims", ("keepdim",))])


def copied(x: torch.Tensor) -> list[str]:
    translation = TRANSLATOR.copy()
    translation.popitem(last=False)
    return list(translation)


def built_here(x: torch.Tensor) -> list[str]:
    translation = OrderedDict([("a", 1), ("b", 2), ("c", 3)])
    translation.popitem(last=False)
    return list(translation)


def autoray_amin(x: torch.Tensor) -> torch.Tensor:  # autoray's translate_wrapper, cut down
    translation = TRANSLATOR.copy()
    keywords = {translation.popitem(last=False)[1][0]: x}
    return torch.amin(**keywords)


def main(backends: list[str]) -> int:
    x = torch.tensor([2.0, 1.0])
    differing = 0
    for backend in backends:
        for fullgraph in (False, True):
            for fn in (copied, built_here, autoray_amin):
                torch._dynamo.reset()
                eager = fn(x)
                try:
                    compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph)(x)
                except Exception as exc:  # the compiled call's own error is the finding
                    compiled = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
                same = type(compiled) is type(eager) and (
                    eager == compiled if isinstance(eager, list) else torch.equal(eager, compiled)
                )
                differing += not same
                print(
                    f"{backend} fullgraph={fullgraph} {fn.__name__}: eager {eager!r}, "
                    f"compiled {compiled!r}: {'same' if same else 'DIFFERS'}"
                )
    print(f"torch {torch.__version__}: {differing} differing")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["eager", "aot_eager"]))
