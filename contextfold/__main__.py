"""``python -m contextfold`` runs the command line."""

import sys

from contextfold.cli import main

sys.exit(main())
