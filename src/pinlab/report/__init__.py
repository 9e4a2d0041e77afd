"""``pinlab.report``: what faces the user -- tables (and, later, plots, HTML and traces).

A higher layer: it may import ``uapi``, ``drivers`` and ``kernel``, never the other way round.
"""

from pinlab.report.matrix import Cell, Matrix, build_machine, build_matrix, render_matrix

__all__ = ["Cell", "Matrix", "build_machine", "build_matrix", "render_matrix"]
