"""``python -m wavern``: the ``wavern`` command."""

import sys

from wavern.app.cli import main

sys.exit(main())
