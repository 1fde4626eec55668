"""The MCP server: Autonote's notes, search and cited chat as tools and resources for
assistants, over stdio (`autonote mcp`) and streamable HTTP (`/mcp`). It calls the same
services as the REST API, for one authenticated user at a time (docs/mcp.md)."""
