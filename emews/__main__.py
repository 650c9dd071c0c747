"""``python -m emews`` is the ``emews`` command."""

from emews.cli import main

if __name__ == "__main__":  # not when multiprocessing's spawn re-imports the main module
    raise SystemExit(main())
