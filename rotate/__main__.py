"""``python -m rotate``: the same CLI as the ``rotate`` console script."""

from rotate.cli.app import console

if __name__ == "__main__":
    console()
