"""The one cache behind npusim's memos (a model layer's kernel profiles, the torch adapter's conv2d calls,
the conv's layout transforms): bounded, first in first out, with hit and miss counts, and :func:`freeze`
to make a key of nested attributes. What a memo may reuse, and why it equals a fresh simulation, each
memo's own module says."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

V = TypeVar("V")


def freeze(v: Any) -> Any:
    """``v`` (dicts, lists and tuples nested) as a hashable value: dicts as sorted item tuples."""
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    return v


class BoundedCache(Generic[V]):
    """At most ``max_entries`` values by key for the Python session; the oldest goes first. ``stats``
    counts what the memo's user records as hits and misses (one dict for the cache's life)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._items: dict[tuple, V] = {}
        self.stats = {"hits": 0, "misses": 0}

    def get(self, key: tuple | None) -> V | None:
        return None if key is None else self._items.get(key)

    def put(self, key: tuple | None, value: V) -> None:
        if key is None:
            return
        if len(self._items) >= self.max_entries:
            self._items.pop(next(iter(self._items)))
        self._items[key] = value

    def clear(self) -> None:
        self._items.clear()
        self.stats.update(hits=0, misses=0)

    def __len__(self) -> int:
        return len(self._items)
