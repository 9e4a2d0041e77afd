"""Tests of ``pinlab.platform``: units, the cost model, topologies, presets and files."""
