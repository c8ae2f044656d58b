"""The write pipeline: every save, delete, ``update(actions)`` and unit of work goes
through it, top to bottom. Collect each object's state (``state``), plan it from its
record (``record``, ``plan``; ``mixed`` for tables several models share), render the
plan as the exact request (``render``, over the vocabulary of writes in ``writes``),
send it through :mod:`dynaunique._transport`, settle a refusal (``transaction``; an
orphan lock taken over by ``heal``) and finish; ``flush`` drives these steps and
``atomic`` is the unit of work. It builds keys and items with :mod:`dynaunique._lock`;
neither of the layers below imports it. No re-exports: import the module you need.
"""
