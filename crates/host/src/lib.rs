//! Launch composition and the MCP server for vfs (in progress).
