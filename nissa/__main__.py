"""``python -m nissa``: the ``nissa`` command."""

import sys

from nissa.cli import main

sys.exit(main())
