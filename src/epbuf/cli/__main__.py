"""``python -m epbuf.cli``: the same as ``epbuf``."""

from . import main

raise SystemExit(main())
