"""``python -m kernelkb``: the same command as the ``kernelkb`` console script."""

from kernelkb.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
