"""``python -m simcore.cli ...``: the ``simcore`` command line without the console script (runs the
checkout it is imported from)."""

from simcore.cli import main

main()
