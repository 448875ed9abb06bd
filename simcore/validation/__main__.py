"""``python -m simcore.validation [REPORT] [options]``: the accuracy reports (:mod:`simcore.cli.validation`)."""

from simcore.cli.validation import main

if __name__ == "__main__":
    raise SystemExit(main())
