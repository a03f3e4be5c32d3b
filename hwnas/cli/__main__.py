"""``python -m hwnas.cli``: the ``nas`` command."""

import sys

from hwnas.cli import main

sys.exit(main())
