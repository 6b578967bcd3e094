"""One value per object for the length of a test, found by identity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class KeptFor(Generic[T]):
    """Values made once per object (`make(obj)`), kept by id: an object that reuses a freed
    id is told apart by identity and gets its own, since the object is kept too."""

    def __init__(self, make: Callable[[Any], T]) -> None:
        self._make = make
        self._kept: dict[int, tuple[Any, T]] = {}

    def of(self, obj: Any) -> T:
        kept = self._kept.get(id(obj))
        if kept is None or kept[0] is not obj:
            return self.renew(obj)
        return kept[1]

    def renew(self, obj: Any) -> T:
        """A new value for `obj`, kept in place of the old one."""
        kept = self._kept[id(obj)] = (obj, self._make(obj))
        return kept[1]


__all__ = ["KeptFor"]
