"""`python -m gitopsq` runs the command line."""

from gitopsq.cli import main

if __name__ == "__main__":
    main()
