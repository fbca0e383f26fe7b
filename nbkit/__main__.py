"""``python -m nbkit`` = the ``nbkit`` command (``nbkit doctor``, ``nbkit run-notebooks``)."""
import sys

from nbkit.cli.main import main

sys.exit(main())
