"""``python -m MedOpenClawLib.worker``: the headless (slicer-core) worker."""

import sys

from .service import main

sys.exit(main())
