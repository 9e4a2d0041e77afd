"""Suite-wide hooks.

Under pytest-xdist (``make test`` runs ``pytest -n auto``) a worker reports "workerfinished"
at the end of ``pytest_sessionfinish``; the controller then closes its gateway, and execnet
gives the worker's session 5 s to return before it sends the worker a SIGINT. What a worker
still does after that report is pytest's own ``pytest_unconfigure``, whose ``gc.collect()``
looks for unraisable exceptions: after the uapi fuzz (10 000 machines full of reference
cycles) that worker holds millions of objects of cyclic garbage and the collection takes
seconds, longer than 5 s on a loaded 2-core machine. The SIGINT then lands wherever the
worker is, typically in the first Python code run after the collection -- hypothesis's gc
callback -- and shows up as a KeyboardInterrupt "ignored in" that callback.

So a worker runs that full collection here, inside ``pytest_sessionfinish`` and thus before
it reports: the controller waits for it (it has no timeout there), and the collection pytest
runs afterwards finds nothing left to free. Finalizers the collection runs still report
through pytest's unraisable hook, which is installed until ``pytest_unconfigure``.

Hypothesis runs without its per-example deadline (200 ms by default): the suite never asserts a
wall-clock time, and on a loaded 2-core machine an example of a correct test can take longer
(``DeadlineExceeded`` seen in ``tests/report/test_html.py`` while other jobs ran).
"""

from __future__ import annotations

import gc

import pytest
from hypothesis import settings

settings.register_profile("pinlab", deadline=None)
settings.load_profile("pinlab")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker
        gc.collect()
