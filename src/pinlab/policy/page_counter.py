"""``page_counter``: hierarchical charging, limits and min/low protection (mm/page_counter.c).

The same code serves memcg (counting pages) and the dmem controller (counting **bytes**); pinlab
uses it for dmem, so every quantity here is in bytes (``policy-semantics.md`` §3, P-37..P-45):

* :meth:`PageCounter.try_charge` (``page_counter_try_charge``) walks from a counter to the root
  adding the charge; the first level whose new usage is **strictly** above its ``max`` takes
  its part back, counts a ``failcnt`` and is returned, and every level already charged below it
  is cancelled -- no level keeps any part of the charge (P-39). From 6.15 the kernel counts
  ``failcnt`` only for counters with ``track_failcnt``, which dmem never sets; pinlab counts it
  always, as a diagnostic no file shows (P-64, not modelled);
* :meth:`PageCounter.uncharge` (``page_counter_uncharge``) never fails; an underflow WARNs
  (``page_counter_cancel``) and clamps usage to 0 (P-41);
* :meth:`PageCounter.set_max` (``page_counter_set_max``) refuses with ``-EBUSY`` when the usage
  already exceeds the new value (P-40);
* ``set_min`` / ``set_low`` and every usage change keep ``children_min_usage`` /
  ``children_low_usage`` of the parent equal to the sum of the children's protected usage
  (``propagate_protected_usage``, P-37);
* :func:`page_counter_calculate_protection` computes one counter's effective ``emin``/``elow``
  (§3.4, P-38, P-42..P-44); it reads the parent's effective values, so it must be applied
  top-down -- :func:`calculate_subtree_protection` does that in pre-order (P-45).

WARNs are not raised: they are appended to :attr:`PageCounter.warnings`, a list shared by the
whole hierarchy (the controller that owns the counters may forward them to the kernel's
WARN log).
"""

from __future__ import annotations

from collections.abc import Iterator

from pinlab.kernel.errno import Errno, KernelError
from pinlab.policy.hierarchy import self_and_ancestors

PAGE_SIZE = 4096
PAGE_COUNTER_MAX = (2**63 - 1) // PAGE_SIZE
"""``PAGE_COUNTER_MAX`` on a 64-bit kernel (``LONG_MAX / PAGE_SIZE``): "no limit".

dmem stores bytes in the counter but keeps this constant, so a dmem limit of 2**51 bytes
(2 PiB) or more reads back as ``max``."""


class PageCounter:
    """``struct page_counter`` (include/linux/page_counter.h), counting bytes.

    Attributes mirror the kernel's fields: ``usage`` (hierarchical: includes descendants),
    ``max``, ``min``, ``low``, ``emin``/``elow`` (effective protection, stored state written
    by :func:`page_counter_calculate_protection`), ``min_usage``/``low_usage`` (this counter's
    protected usage as last propagated), ``children_min_usage``/``children_low_usage`` (the
    sum over the children), ``failcnt`` (refusals at this level, counted on every preset:
    pinlab has no ``track_failcnt``, P-64), ``watermark`` (peak usage) and ``parent``.
    ``children`` (model-only) lists the child counters in creation order so a subtree can be
    walked; ``owner`` is the object embedding the counter (``container_of``), e.g. a dmem pool.
    """

    __slots__ = (
        "children",
        "children_low_usage",
        "children_min_usage",
        "elow",
        "emin",
        "failcnt",
        "low",
        "low_usage",
        "max",
        "min",
        "min_usage",
        "name",
        "owner",
        "parent",
        "protection_support",
        "usage",
        "warnings",
        "watermark",
    )

    def __init__(
        self,
        parent: PageCounter | None = None,
        *,
        protection_support: bool = True,
        name: str = "",
        owner: object = None,
        warnings: list[str] | None = None,
    ) -> None:
        """``page_counter_init(counter, parent, protection_support)``: usage 0, no limit."""
        self.usage = 0
        self.max = PAGE_COUNTER_MAX
        self.min = 0
        self.low = 0
        self.emin = 0
        self.elow = 0
        self.min_usage = 0
        self.low_usage = 0
        self.children_min_usage = 0
        self.children_low_usage = 0
        self.failcnt = 0
        self.watermark = 0
        self.parent = parent
        self.children: list[PageCounter] = []
        self.protection_support = protection_support
        self.name = name
        self.owner = owner
        if warnings is None:
            warnings = parent.warnings if parent is not None else []
        self.warnings: list[str] = warnings
        if parent is not None:
            parent.children.append(self)

    # -- reading -------------------------------------------------------------------------------
    def read(self) -> int:
        """``page_counter_read``: the current (hierarchical) usage."""
        return self.usage

    ancestors = self_and_ancestors
    """This counter and every ancestor, bottom-up (the charge walk)."""

    # -- protected usage -------------------------------------------------------------------------
    def _propagate_protected_usage(self, usage: int) -> None:
        """``propagate_protected_usage``: refresh min/low_usage and the parent's sums (P-37).

        Nothing for the root (no parent) or a counter without protection support.
        """
        parent = self.parent
        if parent is None or not self.protection_support:
            return
        if self.min or self.min_usage:
            protected = min(usage, self.min)
            delta = protected - self.min_usage
            self.min_usage = protected
            if delta:
                parent.children_min_usage += delta
        if self.low or self.low_usage:
            protected = min(usage, self.low)
            delta = protected - self.low_usage
            self.low_usage = protected
            if delta:
                parent.children_low_usage += delta

    # -- charging --------------------------------------------------------------------------------
    def cancel(self, nr: int) -> None:
        """``page_counter_cancel``: take ``nr`` out of this counter only.

        An underflow is the WARN_ONCE "page_counter underflow" (recorded on :attr:`warnings`)
        and usage is clamped to 0 (P-41).
        """
        new = self.usage - nr
        if new < 0:
            label = f" ({self.name})" if self.name else ""
            self.warnings.append(f"page_counter underflow{label}: {new} nr_pages={nr}")
            new = 0
        self.usage = new
        self._propagate_protected_usage(new)

    def charge(self, nr: int) -> None:
        """``page_counter_charge``: charge ``nr`` at every level, ignoring limits."""
        _check_amount(nr)
        for c in self.ancestors():
            new = c.usage + nr
            c.usage = new
            c._propagate_protected_usage(new)
            if new > c.watermark:
                c.watermark = new

    def try_charge(self, nr: int) -> PageCounter | None:
        """``page_counter_try_charge``: charge ``nr`` up to the root, within every ``max``.

        Returns None on success. On failure returns the counter that refused -- the lowest
        level whose new usage would be strictly above its max -- after taking the charge back
        from that level (and counting its ``failcnt``) and cancelling every level below it:
        afterwards no usage anywhere has changed (P-39). ``usage + nr == max`` succeeds.
        """
        _check_amount(nr)
        for c in self.ancestors():
            new = c.usage + nr
            c.usage = new
            if new > c.max:
                c.usage -= nr
                c.failcnt += 1
                below: PageCounter | None = self
                while below is not None and below is not c:
                    below.cancel(nr)
                    below = below.parent
                return c
            c._propagate_protected_usage(new)
            if new > c.watermark:
                c.watermark = new
        return None

    def uncharge(self, nr: int) -> None:
        """``page_counter_uncharge``: cancel ``nr`` at every level (never fails, P-41)."""
        _check_amount(nr)
        for c in self.ancestors():
            c.cancel(nr)

    # -- limits ----------------------------------------------------------------------------------
    def set_max(self, nr: int) -> None:
        """``page_counter_set_max``: ``-EBUSY`` (max unchanged) if usage > ``nr`` (P-40)."""
        _check_amount(nr)
        if self.usage > nr:
            raise KernelError(
                Errno.EBUSY,
                "page_counter_set_max",
                f"usage {self.usage} exceeds the new max {nr}",
            )
        self.max = nr

    def set_min(self, nr: int) -> None:
        """``page_counter_set_min``: store, then propagate protected usage up the tree."""
        _check_amount(nr)
        self.min = nr
        for c in self.ancestors():
            c._propagate_protected_usage(c.usage)

    def set_low(self, nr: int) -> None:
        """``page_counter_set_low``: store, then propagate protected usage up the tree."""
        _check_amount(nr)
        self.low = nr
        for c in self.ancestors():
            c._propagate_protected_usage(c.usage)

    def detach(self) -> None:
        """Unlink this counter from its parent (the pool embedding it is being freed).

        Its protected-usage contribution leaves the parent's sums, so P-37 keeps holding for
        the remaining children. Model-only: the kernel frees the memory.
        """
        parent = self.parent
        if parent is None:
            return
        if self in parent.children:
            parent.children.remove(self)
        parent.children_min_usage -= self.min_usage
        parent.children_low_usage -= self.low_usage
        self.min_usage = 0
        self.low_usage = 0

    def __repr__(self) -> str:
        label = self.name or "page_counter"
        limit = "max" if self.max >= PAGE_COUNTER_MAX else str(self.max)
        return f"<{label} usage={self.usage} max={limit} min={self.min} low={self.low}>"


def _check_amount(nr: int) -> None:
    if nr < 0:
        raise ValueError(f"page_counter amounts are unsigned, got {nr}")


# -- effective protection ----------------------------------------------------------------------


def effective_protection(
    usage: int,
    parent_usage: int,
    setting: int,
    parent_effective: int,
    siblings_protected: int,
    recursive_protection: bool,
) -> int:
    """``effective_protection`` (mm/page_counter.c), §3.4 rule 2-5 for one kind (min or low).

    * overcommit (``siblings_protected > parent_effective``): the parent's protection is
      divided in proportion to protected usage, ``floor(protected * e(p) / Σ(p))`` (P-42);
    * otherwise the child keeps its protected usage ``min(usage, setting)`` (P-43), plus, in
      recursive mode, a share of the unclaimed parent protection in proportion to its
      unprotected usage (P-44).

    Products are formed before dividing, and the floor is exact (policy-semantics.md §3.4).
    The kernel forms the same products in ``unsigned long``, with no ``mult_frac``, so the two
    agree while a product stays below 2**64. dmem counts bytes, so that holds while both
    factors stay below about 4 GiB: with e(p) = 48 GiB and two children protecting 32 GiB each
    (overcommit), the kernel's product wraps to 0 and each child is left 0, where the exact
    value is 24 GiB. No built-in scenario reaches that range.
    """
    protected = min(usage, setting)
    if siblings_protected > parent_effective:
        return protected * parent_effective // siblings_protected
    ep = protected
    if not recursive_protection:
        return ep
    if (
        parent_effective > siblings_protected
        and parent_usage > siblings_protected
        and (usage > protected)
    ):
        unclaimed = (parent_effective - siblings_protected) * (usage - protected)
        ep += unclaimed // (parent_usage - siblings_protected)
    return ep


def page_counter_calculate_protection(
    root: PageCounter, counter: PageCounter, recursive_protection: bool
) -> None:
    """``page_counter_calculate_protection``: set ``counter.emin``/``elow`` (§3.4).

    1. ``counter is root``: nothing -- the root of a calculation is never shielded (P-38);
    2. usage 0: nothing -- the stored values stay as they were (P-38);
    3. parent is the root: the configured ``min``/``low``, uncapped (rule 1, P-25);
    4. otherwise :func:`effective_protection` from the parent's *stored* effective values
       and its children sums.

    Not stateless: call it top-down (:func:`calculate_subtree_protection`, P-45).
    """
    if counter is root:
        return
    usage = counter.usage
    if not usage:
        return
    parent = counter.parent
    if parent is root:
        counter.emin = counter.min
        counter.elow = counter.low
        return
    if parent is None:  # not below ``root``: a top-level counter is its own reference
        return
    parent_usage = parent.usage
    counter.emin = effective_protection(
        usage,
        parent_usage,
        counter.min,
        parent.emin,
        parent.children_min_usage,
        recursive_protection,
    )
    counter.elow = effective_protection(
        usage,
        parent_usage,
        counter.low,
        parent.elow,
        parent.children_low_usage,
        recursive_protection,
    )


def walk_pre_order(root: PageCounter) -> Iterator[PageCounter]:
    """``root`` and its descendants, parents before children (children in creation order)."""
    stack = [root]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(reversed(c.children))


def calculate_subtree_protection(
    root: PageCounter, recursive_protection: bool, *, stop_at: PageCounter | None = None
) -> None:
    """Recompute ``emin``/``elow`` of ``root``'s whole subtree in pre-order (P-45).

    With ``stop_at`` the walk ends right after that counter was processed, as
    ``dmem_cgroup_calculate_protection`` stops after the victim's pool.
    """
    for c in walk_pre_order(root):
        page_counter_calculate_protection(root, c, recursive_protection)
        if c is stop_at:
            break
