"""``python -m dynaunique.cli``: the ``dynaunique`` command without the console script."""

from dynaunique.cli import main

main()
