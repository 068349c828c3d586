"""Runtime types every layer shares, importing nothing else of gristmill (``tests/test_layers.py`` checks):

- ``columns``    column conventions (ids, ``__stats__``/``__meta__``, raw JSON fields, private columns);
- ``accounting`` ``Reject`` (a row or record that could not be used), ``OpCounts`` (rows in / out / removed
                 / rejected per op), ``REASON`` (the removal-reason column);
- ``fused``      ``FusedOp``: a chain of row-local ops applied batch by batch, a failing batch retried row by
                 row so that only the failing rows become rejects, with per-op counts;
- ``charset``    decoding HTML bytes (declared charset, ``<meta>``, detection), for readers and ops alike;
- ``defaults``   the one declaration of each run default (batch size, seed, shard size, ...);
- ``names``      "did you mean" suggestions for errors.

``io/`` and ``ops/`` both build on this package and import neither each other nor an engine.
"""
