"""``python -m xrisk``: the runner's command line (the same as the ``xrisk`` command)."""

from xrisk.runner.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
