"""The mixins :class:`dynaunique.Model` is made of, one job each (internal).

``binding`` (declaration → ModelInfo, the metaclass), ``instance`` (what an instance remembers),
``planning`` (an object and a call → a Plan), ``calls`` (a call → a unit of work), ``lookup``
(``get_by_unique``), ``reads`` (lock items kept out of reads), ``stored`` (values as stored).
"""
