"""The walk up a hierarchy that cgroups and page counters share: ``for (c = node; c; c =
c->parent)`` in kernel/cgroup/cgroup.c and mm/page_counter.c."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, Self, TypeVar


class Node(Protocol):
    """Anything with a ``parent`` of its own kind (None at the root)."""

    @property
    def parent(self) -> Self | None: ...


NodeT = TypeVar("NodeT", bound=Node)


def self_and_ancestors(node: NodeT) -> Iterator[NodeT]:
    """``node`` and every ancestor, bottom-up (the charge walk, ``cgroup_is_descendant``)."""
    c: NodeT | None = node
    while c is not None:
        yield c
        c = c.parent
