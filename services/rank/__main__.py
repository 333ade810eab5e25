"""`python -m services.rank`: the rank service."""

from recallatron import tracing
from services.rank.server import main

tracing.setup("rank")
main()
