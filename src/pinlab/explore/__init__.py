"""``pinlab explore``: a bounded systematic search for what breaks before the kernel does.

Sequences of userspace calls (:mod:`pinlab.uapi`) and device events over exporters ×
importers × kernel profiles × policies (:mod:`pinlab.explore.target`,
:mod:`pinlab.explore.ops`), run breadth-first with partial-order reduction and state hashing
(:mod:`pinlab.explore.search`), checked against the invariants of
:mod:`pinlab.explore.invariants`; each violation is shrunk, traced, classified and written as a
reproducer (:mod:`pinlab.explore.findings`), reported as text, JSON or HTML
(:mod:`pinlab.explore.render`).
"""

from pinlab.explore.findings import Finding, KnownFindings
from pinlab.explore.search import Report, explore
from pinlab.explore.target import POLICIES, Target, exporter_kinds, importer_kinds, targets

__all__ = [
    "POLICIES",
    "Finding",
    "KnownFindings",
    "Report",
    "Target",
    "explore",
    "exporter_kinds",
    "importer_kinds",
    "targets",
]
