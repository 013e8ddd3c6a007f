"""``python -m drmario <command>``: see `drmario.run.cli`."""

import sys

from drmario.run.cli import main

if __name__ == "__main__":
    sys.exit(main())
