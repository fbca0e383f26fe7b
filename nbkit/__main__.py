"""``python -m nbkit`` = the ``nbkit`` command (``nbkit doctor``, ``nbkit run-notebooks``)."""
import sys

from nbkit.cli import main

sys.exit(main())
