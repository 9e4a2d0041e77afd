"""The run's random streams: one seeded numpy ``Generator`` per stochastic component.

Every stochastic source of a run -- the arrivals of a Poisson workload, an ODP fault's tail,
perftest's service-time jitter, a desktop app's arrival process -- draws from
:meth:`Streams.generator` under its own component name (``"<tenant>/<source>"``). Each
generator is a PCG64 seeded by :class:`numpy.random.SeedSequence` from the run seed with the
component's name (its sha256, as 32-bit words) as the spawn key, so:

* the same seed gives the same numbers, byte for byte (nothing reads a clock or the OS);
* different seeds give different numbers (replications differ);
* a component added to a scenario, or one that draws more, does not shift any other
  component's stream (streams are independent of creation and draw order).

A generator is created on first use, so :attr:`Streams.sources` lists exactly the sources
that drew: a run with none is *deterministic* -- its seed changes nothing, and a sweep does not
replicate it.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["Streams"]


class Streams:
    """The named random streams of one run (module docstring)."""

    __slots__ = ("_generators", "seed")

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._generators: dict[str, np.random.Generator] = {}

    def generator(self, component: str) -> np.random.Generator:
        """The generator of ``component`` (created, and so counted as a source, on first
        use)."""
        gen = self._generators.get(component)
        if gen is None:
            digest = hashlib.sha256(component.encode()).digest()
            key = tuple(int(w) for w in np.frombuffer(digest, dtype="<u4"))
            seq = np.random.SeedSequence(entropy=self.seed, spawn_key=key)
            gen = np.random.Generator(np.random.PCG64(seq))
            self._generators[component] = gen
        return gen

    @property
    def sources(self) -> list[str]:
        """The components that drew, sorted; empty for a deterministic run."""
        return sorted(self._generators)
