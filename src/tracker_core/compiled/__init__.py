"""The compiled hot path and its pure-Python twins (docs/architecture.md).

Each of ``classify`` (pattern-limit filtering), ``protocol`` (per-request checks) and the Bloom
filter's batch hashing has a Cython module ``_NAME_c.pyx`` and a readable twin ``_NAME_py.py``
with the same functions; ``twins`` picks one (``TRACKER_PURE_PYTHON=1``: the twins), and the
tests compare them. ``classify.py`` and ``protocol.py`` are what the rest of the tracker imports;
the Bloom filter's Redis side (tracker_core.items.bloom) loads its twin through ``twins``.

May import: nothing of tracker_core outside this package.
"""
