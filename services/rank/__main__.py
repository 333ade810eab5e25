"""`python -m services.rank`: the rank service."""

from services.rank.server import main

main()
