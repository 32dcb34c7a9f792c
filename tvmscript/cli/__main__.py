"""``python -m tvmscript.cli``: the ``tvms`` command, where the entry point is not on the PATH."""

import sys

from . import main

sys.exit(main())
