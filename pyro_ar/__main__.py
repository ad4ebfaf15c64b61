"""``python -m pyro_ar``: the command line of :mod:`pyro_ar.cli` (``fit``, ``predict``, ``evaluate``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
