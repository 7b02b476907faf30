"""``python -m ranking_plugins evaluate QRELS RUN ...``: the ``ranking-plugins`` command."""

import sys

from ranking_plugins.cli import main

if __name__ == "__main__":
    sys.exit(main())
