"""`python -m recallatron_mcp`: the MCP server (see recallatron_mcp.server)."""

from __future__ import annotations

import sys

from recallatron_mcp.server import main

if __name__ == "__main__":
    sys.exit(main())
