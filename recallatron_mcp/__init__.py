"""An MCP server exposing Recallatron's seven memory tools to agents."""
