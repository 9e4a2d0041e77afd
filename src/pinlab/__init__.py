"""pinlab: an executable, kernel-faithful model of dma-buf P2P pinning.

Layers (see ``docs/architecture.md``): ``pinlab.kernel`` is the mechanism (dma-buf core,
fences, TTM, P2PDMA, RDMA umem), knows nothing of policy or time and imports no other pinlab
layer.
"""

__version__ = "0.1.0"
