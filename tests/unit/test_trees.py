"""What the checker looks into: containers, pytree registrations, tensor subclasses, distributions
and dense views; and what it cannot compare."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils import _pytree

from pytest_torchcompile.errors import UncopyableInputError
from pytest_torchcompile.judging import parity
from pytest_torchcompile.judging.parity import CompareOptions
from pytest_torchcompile.running.copier import clone_tree
from pytest_torchcompile.running.sides import SideResult, differentiable_outputs
from pytest_torchcompile.running.trees import by_identity, children, containers, leaves, tensors


class Registered:
    def __init__(self, value: torch.Tensor, scale: float) -> None:
        self.value, self.scale = value, scale


_pytree.register_pytree_node(
    Registered,
    lambda r: ([r.value, r.scale], None),
    lambda items, _: Registered(*items),
    flatten_with_keys_fn=lambda r: (
        [(_pytree.GetAttrKey("value"), r.value), (_pytree.GetAttrKey("scale"), r.scale)],
        None,
    ),
)


class Dense:
    """Like a LinearOperator: a factor kept, a dense view on request."""

    def __init__(self, factor: torch.Tensor) -> None:
        self.factor = factor

    def to_dense(self) -> torch.Tensor:
        return self.factor @ self.factor.T


class Opaque:
    """Keeps no state a walk can see (no __dict__, no slots): a C object's stand-in."""

    __slots__ = ()


class Slotted:
    """Compares by identity; holds its state in slots."""

    __slots__ = ("value",)

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class Held:
    """Compares by identity, as torch.distributions.Transform does; holds a tensor."""

    def __init__(self, scale: torch.Tensor) -> None:
        self.scale = scale
        self.name = "held"

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


def test_registered_types_flatten_with_their_key_names() -> None:
    value = torch.ones(2)
    assert children(Registered(value, 0.5)) == [(".value", value), (".scale", 0.5)]


def test_tensor_subclasses_flatten_to_their_inner_tensors_only_when_asked() -> None:
    a, b = torch.zeros(2), torch.ones(2)
    two = TwoTensor(a, b)
    assert children(two) is None  # backward and copies treat it as one tensor
    inner = children(two, inner_tensors=True)
    assert inner is not None
    assert [name for name, _ in inner] == [".a", ".b"]
    assert children(torch.zeros(1), inner_tensors=True) is None


def test_distributions_show_their_shapes_and_tensors() -> None:
    loc = torch.zeros(3)
    dist = torch.distributions.MultivariateNormal(loc, covariance_matrix=torch.eye(3))
    names = [name for name, _ in children(dist) or []]
    assert names[:2] == [".batch_shape", ".event_shape"]
    assert ".loc" in names and ".covariance_matrix" in names


def test_a_dense_view_is_compared() -> None:
    found = children(Dense(torch.eye(2)))
    assert found is not None
    ((name, dense),) = found
    assert name == ".to_dense()"
    torch.testing.assert_close(dense, torch.eye(2))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        (3, False),
        ("s", False),
        (torch.float32, False),
        (Opaque(), True),
        (Held(torch.ones(1)), True),
        (torch.distributions.transforms.ExpTransform(), False),  # equal to any other
        (torch.nn.ReLU(), False),
    ],
)
def test_by_identity_means_no_equality_of_its_own(value: Any, expected: bool) -> None:
    assert by_identity(value) is expected


def test_differentiable_outputs_are_found_inside_distributions_and_dense_views() -> None:
    w = torch.ones(2, requires_grad=True)
    out = (torch.distributions.Normal(w * 2, w.exp()), Dense((w * 3).unsqueeze(0)))
    assert len(differentiable_outputs(out)) == 3


def _side(output: Any) -> SideResult:
    return SideResult(output=output, exception=None, after={}, grads={})


def _compare(eager: Any, compiled: Any) -> parity.ParityReport:
    return parity.compare(_side(eager), _side(compiled), CompareOptions())


def test_an_opaque_output_is_reported_not_compared_never_by_identity() -> None:
    report = _compare(Opaque(), Opaque())
    assert report.ok
    (leaf,) = report.leaves
    assert not leaf.judged
    assert leaf.note.startswith("output: cannot compare a Opaque (")


def test_objects_with_slots_are_compared_by_their_slots() -> None:
    assert _compare(Slotted(torch.ones(2)), Slotted(torch.ones(2))).ok
    report = _compare(Slotted(torch.ones(2)), Slotted(torch.full((2,), 2.0)))
    assert [leaf.leaf for leaf in report.failures] == ["output.value"]


def test_objects_that_compare_by_identity_are_compared_by_what_they_hold() -> None:
    # Two runs build two objects: their identity says nothing, their attributes do.
    report = _compare((Held(torch.ones(2)),), (Held(torch.ones(2)),))
    assert report.ok
    assert [leaf.leaf for leaf in report.leaves] == ["output[0].name", "output[0].scale"]
    wrong = _compare(Held(torch.ones(2)), Held(torch.zeros(2)))
    assert [leaf.leaf for leaf in wrong.failures] == ["output.scale"]


def test_a_wrong_dense_view_or_distribution_fails() -> None:
    factor = torch.eye(2)
    assert _compare(Dense(factor), Dense(factor.clone())).ok
    assert not _compare(Dense(factor), Dense(factor * 1.01)).ok
    normal = torch.distributions.Normal
    wrong = _compare(
        normal(torch.zeros(2), torch.ones(2)), normal(torch.zeros(2), torch.ones(2) * 2)
    )
    assert [leaf.leaf for leaf in wrong.failures] == ["output.scale"]


class Irrep(tuple):  # type: ignore[type-arg]
    """Like e3nn's o3.Irrep: a tuple that refuses len() and membership tests by design."""

    def __len__(self) -> int:
        raise NotImplementedError


def test_a_tuple_that_refuses_len_is_walked_as_a_tuple() -> None:
    irrep = Irrep((1, 1))
    assert children(irrep) == [("[0]", 1), ("[1]", 1)]
    assert _compare(irrep, Irrep((1, 1))).ok
    assert [leaf.leaf for leaf in _compare(irrep, Irrep((1, 2))).failures] == ["output[1]"]


class Refusing:
    """A value whose own methods raise when read: it cannot be compared, and says why."""

    @property
    def __dict__(self) -> dict[str, object]:  # type: ignore[override]
        raise RuntimeError("no state today")


def test_a_value_that_raises_when_read_is_not_judged_and_says_why() -> None:
    (leaf,) = _compare(Refusing(), Refusing()).leaves
    assert not leaf.judged and leaf.note.startswith("output: cannot compare a Refusing")


def test_a_calls_inputs_are_walked_through_tuples_lists_and_dicts_only() -> None:
    x, y, module = torch.ones(1), torch.zeros(2), torch.nn.Linear(1, 1)
    tree = ((x, [module, {"y": y, "n": 3}]), {})
    assert [type(leaf) for leaf in leaves(tree)] == [
        torch.Tensor,
        torch.nn.Linear,
        torch.Tensor,
        int,
    ]
    assert [t is u for t, u in zip(tensors(tree), (x, y), strict=True)] == [True, True]
    assert containers({"y": y}) == [("['y']", y)]
    assert containers(x) is None


def test_an_uncopyable_part_is_named_by_its_path_in_the_inputs() -> None:
    generator = (i for i in range(3))
    with pytest.raises(
        UncopyableInputError, match=r"cannot copy input 1\[1\]\['g'\] \(generator\)"
    ):
        clone_tree(((torch.ones(1), [torch.ones(1), {"g": generator}]), {}))
