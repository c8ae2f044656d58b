"""Declaring constraints, end to end: every form issue 3 promises, against the local server.

Composite and scoped locks, normalize (callable and mapping), conditional locks, the value types,
hashed locks, TTL, ``update(actions)``, the write paths that must refuse (``batch_write``,
PynamoDB's ``TransactWrite``) and ``get_by_unique``, one file per topic; the models and helpers
they share are in ``declared.py``, the ``wire`` fixture in ``conftest.py``. Every test ends by
checking that the table holds exactly the locks its records need. (The mistakes caught at class
definition need no server: tests/unit/test_declaring.py.)
"""
