"""`python -m alight` (and `torchrun -m alight train CONFIG`): the `alight` command."""

from alight.cli import main

if __name__ == "__main__":
    main()
