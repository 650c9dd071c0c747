"""``python -m emews`` is the ``emews`` command."""

from emews.cli import main

raise SystemExit(main())
