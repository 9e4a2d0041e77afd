"""``pinlab.sim``: time, bandwidth and contention on top of the model (SimPy).

:mod:`~pinlab.sim.flows` shares link bandwidth between concurrent transfers, max-min fairly,
recomputed only when a transfer starts or ends.
"""
