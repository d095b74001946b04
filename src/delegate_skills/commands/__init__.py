"""The `delegate` command: click groups, the MCP server and doctor (not bundled into skills)."""
