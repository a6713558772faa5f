"""`python -m ccm` runs the CLI."""

from ccm.cli import main

main()
