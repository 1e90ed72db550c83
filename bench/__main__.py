"""`python -m bench [--quick] [--only METRIC]`: see bench/cli.py."""

from bench.cli import main

main()
