"""`python -m services.embed` serves the embed service."""

from services.embed.server import main

raise SystemExit(main())
