"""The one copier: what it shares, what it copies, and what it refuses (running/copier.py)."""

from __future__ import annotations

import dataclasses
import enum
import gc
import importlib.util
import sys
import threading
import types
from collections import OrderedDict
from typing import Any

import pytest
import torch

from pytest_torchcompile import _compat
from pytest_torchcompile.errors import UncopyableInputError
from pytest_torchcompile.running.copier import clone_tree, shared_objects

SENTINEL = object()


class Mode(enum.Enum):
    A = 1


class Config:
    def __init__(self) -> None:
        self.scale = 2.0


CONFIG = Config()
REGISTRY = {"default": Config()}
HOOKS: OrderedDict[str, Config] = OrderedDict(default=Config())


class Holder:
    def __init__(self, *held: Any) -> None:
        self.held = list(held)


@dataclasses.dataclass
class Cache:
    keys: torch.Tensor
    values: torch.Tensor


class Sized:
    def __new__(cls, dim: int) -> Sized:
        return super().__new__(cls)

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.weight = torch.ones(dim)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a, self.b = torch.zeros(2), [1, 2]


def test_module_level_objects_are_shared_and_the_rest_copied() -> None:
    holder = Holder(SENTINEL, Mode.A, CONFIG, REGISTRY["default"], Config())
    copied = clone_tree(holder)
    assert copied is not holder and copied.held is not holder.held
    assert copied.held[:4] == [SENTINEL, Mode.A, CONFIG, REGISTRY["default"]]
    assert all(a is b for a, b in zip(copied.held[:4], holder.held[:4], strict=True))
    assert copied.held[4] is not holder.held[4] and copied.held[4].scale == 2.0
    shared = shared_objects(((holder,), {}))
    assert {id(o) for o in shared} == {id(CONFIG), id(REGISTRY["default"])}


def test_non_leaf_tensors_in_an_object_stay_non_leaves_behind_a_copied_leaf() -> None:
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(4, 3)
    keys = x @ w
    cache = Cache(keys=keys, values=keys.t())
    copied = clone_tree(cache)
    assert copied.keys.grad_fn is not None and copied.values.grad_fn is not None
    assert torch.equal(copied.keys, keys) and copied.values.stride() == keys.t().stride()
    assert copied.values._base is copied.keys  # a view stays a view of its base's copy
    copied.keys.sum().backward()
    assert w.grad is None  # the gradient reaches a copy of the leaf, not the caller's


def test_a_class_with_its_own_new_and_slots_are_rebuilt_from_their_state() -> None:
    sized, slotted = clone_tree((Sized(3), Slotted()))
    assert isinstance(sized, Sized) and sized.dim == 3 and torch.equal(sized.weight, torch.ones(3))
    assert isinstance(slotted, Slotted) and slotted.b == [1, 2]


def test_views_inside_objects_keep_their_aliasing() -> None:
    base = torch.arange(6.0)
    first, second = clone_tree((Holder(base[1:]), Holder(base)))
    assert first.held[0].untyped_storage().data_ptr() == second.held[0].untyped_storage().data_ptr()
    assert first.held[0].storage_offset() == 1


def test_jagged_nested_tensors_are_copied_with_their_layout() -> None:
    nt = torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)], layout=torch.jagged)
    copied = clone_tree(nt)
    assert copied.layout == torch.jagged and copied is not nt
    assert torch.equal(copied.values(), nt.values())


def test_what_cannot_be_copied_is_named_by_its_path() -> None:
    with pytest.raises(UncopyableInputError, match=r"input 0\.held\[1\] \(lock\)"):
        clone_tree((None, (Holder(1, threading.Lock()),), {}))


def test_a_memo_keeps_what_it_copied_alive_for_later_copies() -> None:
    memo: dict[int, Any] = {}
    clone_tree(Holder(Config()), memo)
    kept = memo[id(memo)]
    assert any(isinstance(o, Config) for o in kept)  # its id cannot be reused while memo serves


def test_a_memo_names_only_the_originals_it_copied_not_temporaries() -> None:
    # A memo filtered to its tensors (Copies.unchanged) serves later copies without the
    # keep-alive list: an id of a dead temporary would answer a new object with another copy.
    w = torch.ones(25, requires_grad=True)
    originals = [w * 2, torch.nn.Parameter(torch.ones(3))]
    memo: dict[int, Any] = {}
    clone_tree(originals, memo)
    copied_ids = {key for key, value in memo.items() if isinstance(value, torch.Tensor)}
    assert copied_ids <= {id(t) for t in originals}


class ClearsOnGetstate:
    """pyro's AutoGuide: its `__getstate__` clears fields of the live object."""

    def __init__(self) -> None:
        self.model = Config()
        self.weight = torch.ones(2)

    def __getstate__(self) -> dict[str, Any]:
        self.model = None  # type: ignore[assignment]
        return dict(vars(self))


def test_copying_never_changes_the_original_even_where_its_copy_protocol_does() -> None:
    original = ClearsOnGetstate()
    model = original.model
    copied = clone_tree(original)
    assert original.model is model
    assert isinstance(copied.model, Config) and copied.model is not model
    assert torch.equal(copied.weight, original.weight) and copied.weight is not original.weight


def test_a_top_level_sentinel_of_a_module_is_shared_whatever_its_class() -> None:
    holder = Holder(SENTINEL)  # `object()`: its class is no module's
    assert clone_tree(holder).held[0] is SENTINEL


def _import_sentinel_module(path: Any, name: str) -> Any:
    path.write_text("SENTINEL = object()\n")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_module_imported_or_imported_again_after_a_copy_has_its_sentinels_shared(
    tmp_path: Any,
) -> None:
    clone_tree(Holder(SENTINEL))  # the modules as they stand are indexed
    name = "copier_sentinels_module"
    try:
        first = _import_sentinel_module(tmp_path / f"{name}.py", name)
        assert clone_tree(Holder(first.SENTINEL)).held[0] is first.SENTINEL
        del sys.modules[name]
        again = _import_sentinel_module(tmp_path / f"{name}.py", name)
        assert again.SENTINEL is not first.SENTINEL
        assert clone_tree(Holder(again.SENTINEL)).held[0] is again.SENTINEL
    finally:
        sys.modules.pop(name, None)


class LazyModule(types.ModuleType):
    """A module that stands in for another in `sys.modules` (transformers' `_LazyModule`)."""


@pytest.mark.parametrize("versioned", [True, False], ids=["dict-version", "no-dict-version"])
def test_a_module_installed_in_place_after_a_copy_is_shared_with_its_sentinels(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, versioned: bool
) -> None:
    """`sys.modules[name] = other` keeps the size of `sys.modules` and, where `name` is not the
    last module, its last entry: the copier must see the new module all the same (where torch
    cannot read the version of `sys.modules`, by its modules)."""
    if not versioned:
        monkeypatch.setattr(_compat, "dict_version", lambda mapping: None)
    name = "copier_in_place_module"
    try:
        _import_sentinel_module(tmp_path / f"{name}.py", name)
        _import_sentinel_module(tmp_path / f"{name}_after.py", f"{name}_after")  # `name` not last
        clone_tree(Holder(SENTINEL))  # the modules as they stand are indexed
        lazy = LazyModule(name)
        lazy.SENTINEL = object()  # type: ignore[attr-defined]
        lazy.__file__ = str(tmp_path / f"{name}.py")
        sys.modules[name] = lazy
        copied = clone_tree(Holder(lazy, lazy.SENTINEL)).held  # type: ignore[attr-defined]
        assert copied[0] is lazy and copied[1] is lazy.SENTINEL  # type: ignore[attr-defined]
        stand_in = types.SimpleNamespace(SENTINEL=object())  # a test's fake module
        monkeypatch.setitem(sys.modules, name, stand_in)
        assert clone_tree(Holder(stand_in)).held[0] is stand_in
    finally:
        monkeypatch.undo()  # before the modules go: undone later, it would put `lazy` back
        for module in (name, f"{name}_after"):
            sys.modules.pop(module, None)


def test_a_copy_leaves_no_reference_cycle_behind() -> None:
    """The copies a check makes are freed when the check drops them, not at the next garbage
    collection (which a check's fixed cost would pay for, and the tensors' memory wait on)."""
    tree = (Holder(Config(), torch.ones(3)), Cache(torch.ones(2), torch.zeros(2)))
    clone_tree(tree)  # the module-level index built, as before a warm check
    while gc.collect():  # what earlier tests left, and what freeing it leaves
        pass
    gc.disable()
    try:
        clone_tree(tree)
        assert gc.collect() == 0
    finally:
        gc.enable()


class Ordered(dict[Any, Any]):
    """A dict that lists its keys in order of use (an LRU cache's bookkeeping)."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[Any] = []

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.order.append(key)


def test_a_container_subclass_copied_with_its_bookkeeping_keeps_it_as_it_was() -> None:
    """Its items go in through the builtin's own method: the state copied holds the subclass's
    bookkeeping already, so a copy of a copy is the original again."""
    cache = Ordered()
    cache[Config()] = torch.ones(2)
    cache[Config()] = torch.zeros(2)
    copied = clone_tree(clone_tree(cache))
    assert len(copied.order) == 2 and set(copied.order) == set(copied)


class Unhashable(type):
    """A metaclass whose classes cannot be hashed (it defines `__eq__` and no `__hash__`)."""

    def __eq__(cls, other: object) -> bool:
        return cls is other


class Plain(metaclass=Unhashable):
    def __init__(self) -> None:
        self.weight = torch.ones(2)


def test_ordered_dicts_are_copied_as_their_protocol_rebuilds_them() -> None:
    """A plain one as a dict is (its items copied, a cycle through it kept); one with
    attributes of its own, or of a subclass, through the protocol; a module-level one shared."""
    plain: OrderedDict[str, Any] = OrderedDict(w=torch.ones(2), mode=Mode.A)
    plain["self"] = plain
    tagged: OrderedDict[str, Any] = OrderedDict(w=torch.ones(2))
    vars(tagged)["note"] = Config()
    copied_plain, copied_tagged, hooks = clone_tree([plain, tagged, HOOKS])
    assert type(copied_plain) is OrderedDict and list(copied_plain) == ["w", "mode", "self"]
    assert copied_plain["self"] is copied_plain and copied_plain["mode"] is Mode.A
    assert copied_plain["w"] is not plain["w"] and torch.equal(copied_plain["w"], plain["w"])
    assert vars(copied_tagged)["note"] is not vars(tagged)["note"]
    assert vars(copied_tagged)["note"].scale == 2.0
    assert hooks is HOOKS
    module = torch.nn.Linear(2, 2)
    module.register_forward_hook(lambda *_: None)
    copied_module = clone_tree(module)
    assert type(copied_module._forward_hooks) is OrderedDict
    assert copied_module._forward_hooks is not module._forward_hooks
    assert list(copied_module._forward_hooks) == list(module._forward_hooks)


def test_an_object_of_an_unhashable_class_is_copied() -> None:
    original = Plain()
    copied = clone_tree(original)
    assert type(copied) is Plain and copied.weight is not original.weight


def test_a_closure_over_its_object_is_rebuilt_over_the_copy_unless_a_part_cannot_be_copied():
    class Holder:
        pass

    def over(obj: Holder, *extra: object):
        def get() -> tuple[object, ...]:
            return (obj, *extra)

        return get

    held = Holder()
    held.get = over(held)
    held.method = held.get  # the same closure twice: one rebuilt function in the copy
    copied = clone_tree(held)
    assert copied.get() == (copied,) and copied.get is copied.method
    assert held.get() == (held,)  # the original's closure untouched
    locked = Holder()
    locked.get = over(locked, threading.Lock())  # a lock cannot be copied: held as it is
    assert clone_tree(locked).get() == locked.get()


def test_a_closure_refused_after_a_copy_took_it_runs_whole_on_the_originals():
    """A hook on every submodule closing over the model (through an object) and a dict keyed by
    an autograd node, which no copy takes: the submodules' copies, made while filling the
    hook's cells, hold the rebuilt hook; after the refusal it must still run (torch-pruning's
    dependency graph), on the originals, as the hook itself would."""

    class Graph:
        def __init__(self, model: torch.nn.Module) -> None:
            self.model = model

    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    graph = Graph(net)
    x = torch.randn(2, 3, requires_grad=True)
    nodes = {(x * 2).grad_fn: net[0]}
    visited: dict[torch.nn.Module, int] = {}

    def hook(module: torch.nn.Module, args: object, out: torch.Tensor) -> None:
        visited[module] = visited.get(module, 0) + 1
        nodes[out.grad_fn] = module
        assert graph.model is net

    for module in net.modules():
        module.register_forward_hook(hook)
    copied = clone_tree(net)
    copied(x)
    assert len(visited) == 3 and all(m in visited for m in copied.modules())
    held = {id(h) for m in copied.modules() for h in m._forward_hooks.values()}
    assert len(held) == 1  # one function in the copy, as in the original


class _Named:
    """A base whose reduction rebuilds itself, not the subclass (pywt's Cython wavelets)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> Any:
        return (_Named, (self.name,))


class _NamedModule(torch.nn.Module, _Named):
    def __init__(self, name: str) -> None:
        torch.nn.Module.__init__(self)
        _Named.__init__(self, name)
        self.weight = torch.nn.Parameter(torch.ones(2))


class _MappingModule(torch.nn.Module, dict):  # type: ignore[misc]
    __hash__ = object.__hash__

    def __reduce__(self) -> Any:
        return (dict, ())


def test_a_base_reduction_that_rebuilds_another_class_is_not_taken_for_a_copy() -> None:
    # ptwt's _ShannonWavelet (nn.Module over pywt's ContinuousWavelet) was copied as a bare
    # ContinuousWavelet: the replay raised "no attribute 'named_parameters'".
    module = _NamedModule("db1")
    copied = clone_tree(module)
    assert type(copied) is _NamedModule and copied.name == "db1"
    assert copied.weight is not module.weight and torch.equal(copied.weight, module.weight)
    with pytest.raises(UncopyableInputError, match="its reduction rebuilds a dict, not a _Mapping"):
        clone_tree(_MappingModule())
