"""``python -m rotate``: the same CLI as the ``rotate`` console script."""

import sys

from rotate.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
