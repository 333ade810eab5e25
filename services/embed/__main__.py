"""`python -m services.embed` serves the embed service."""

from recallatron import tracing
from services.embed.server import main

tracing.setup("embed")
raise SystemExit(main())
