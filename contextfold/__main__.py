"""``python -m contextfold`` runs the command line."""

import sys

from contextfold.console import main

sys.exit(main())
