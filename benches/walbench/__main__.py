"""`python -m walbench`: the end-to-end benchmark (benches/run.sh)."""

import sys

from .cli import main

sys.exit(main())
