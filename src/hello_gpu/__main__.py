"""``python -m hello_gpu``: the same as the ``hello-gpu`` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
