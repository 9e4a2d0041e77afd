"""``pinlab advise``: search the administrator's policy space for a policy that meets the
``--protect`` expressions (and maximises a metric), with the sweep machinery, bisection along
the monotone limits and an optimiser (optuna's TPE) for the rest; write it, verify it, show
the evidence. ``docs/advise.md`` is the guide.

* :mod:`~pinlab.advise.space` -- the knobs over a policy document;
* :mod:`~pinlab.advise.evaluate` -- points as sweep points, judged by the claims' language;
* :mod:`~pinlab.advise.search` -- the optimiser, then bisection;
* :mod:`~pinlab.advise.output` -- the policy file, the table, the plot, the page;
* :mod:`~pinlab.advise.advisor` -- validation first, then search, write, verify.
"""

from __future__ import annotations

from pinlab.advise.advisor import Outcome, Plan, advise, prepare

__all__ = ["Outcome", "Plan", "advise", "prepare"]
