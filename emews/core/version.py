"""The package's version: read from here by setup.cfg and by :mod:`emews.core.build` (the imported
code's own version, not the installed distribution's metadata)."""

VERSION = "0.1.0"
