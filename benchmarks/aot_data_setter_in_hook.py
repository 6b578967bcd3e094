"""A forward hook that rewrites a layer's weight through `.data` after the layer ran: compiled
(`aot_eager`, `inductor`) back-propagates through the rewritten weight, eager through the one the
layer used (torch 2.13, CPU).

    python benchmarks/aot_data_setter_in_hook.py aot_eager inductor   # exits 1 while they differ

Found by zero-change mode on captum 0.9.0's `test_lrp_simple_repeat_attributions` (tests/attr/
test_lrp.py and layer/test_layer_lrp.py) on `aot_eager`: "grad of input 0" 25% off. captum's LRP
rules (GammaRule, Alpha1_Beta0_Rule) set `module.weight.data` in a forward hook; Dynamo traces
the `.data =` as a `set_` on the graph input. Here without the plugin: eager grad of x
[9, 18, 18], compiled [12, 22.5, 22.5]."""

import copy
import sys

import torch
from torch import nn


class SimpleLRPModel(nn.Module):  # captum.testing.helpers.basic_models.SimpleLRPModel
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3, bias=False)
        self.linear.weight.data.fill_(2.0)
        self.relu = nn.ReLU(inplace=False)
        self.linear2 = nn.Linear(3, 1, bias=False)
        self.linear2.weight.data.fill_(3.0)

    def forward(self, x):
        return self.linear2(self.relu(self.linear(x)))


def gamma_hook(module, inputs, outputs):  # GammaRule(gamma=0.25)._manipulate_weights
    module.weight.data = module.weight.data + 0.25 * module.weight.data.clamp(min=0)


def alpha_beta_hook(module, inputs, outputs):  # Alpha1_Beta0_Rule._manipulate_weights
    module.weight.data = module.weight.data.clamp(min=0)


def run(model, x):
    x = x.clone().requires_grad_()
    y = model(x)
    y.backward(torch.ones_like(y))
    return (
        y.detach(),
        x.grad,
        model.linear.weight.grad
        if hasattr(model, "linear")
        else model._orig_mod.linear.weight.grad,
    )


def main(backend):
    torch.manual_seed(0)
    base = SimpleLRPModel()
    base.linear.weight.data[0, 0] = -1.0  # a negative weight, so the rules change something
    x = torch.tensor([[1.0, 2.0, 3.0]])
    results = []
    for compiled in (False, True):
        model = copy.deepcopy(base)
        model.linear.register_forward_hook(gamma_hook)
        model.linear2.register_forward_hook(alpha_beta_hook)
        torch._dynamo.reset()
        results.append(run(torch.compile(model, backend=backend) if compiled else model, x))
    (ye, gxe, gwe), (yc, gxc, gwc) = results
    print(f"[{backend}] output eager {ye.tolist()} compiled {yc.tolist()}")
    print(f"[{backend}] grad x eager {gxe.tolist()} compiled {gxc.tolist()}")
    print(
        f"[{backend}] grad linear.weight eager {'None' if gwe is None else 'tensor'} compiled {'None' if gwc is None else 'tensor'}"
    )
    if gwe is not None and gwc is not None:
        print(f"[{backend}] grad linear.weight max |diff| {(gwe - gwc).abs().max().item()}")
    same = torch.allclose(ye, yc) and torch.allclose(gxe, gxc) and (gwe is None) == (gwc is None)
    return same


if __name__ == "__main__":
    backends = sys.argv[1:] or ["aot_eager"]
    ok = [main(b) for b in backends]
    print("agree" if all(ok) else "DISAGREE")
    sys.exit(0 if all(ok) else 1)
