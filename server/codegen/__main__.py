"""`python -m codegen OUT_DIR [--check]`: see `codegen.generate`."""

from __future__ import annotations

import sys

from codegen.generate import main

sys.exit(main())
