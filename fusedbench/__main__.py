"""`python -m fusedbench` runs the command-line interface."""

import sys

from fusedbench.cli import main

sys.exit(main())
