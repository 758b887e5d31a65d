"""`python -m agents_sqlalchemy.cli ...`: the same as the `agents-sqlalchemy` script."""

from . import main

main()
