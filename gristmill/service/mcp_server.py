"""`gristmill mcp`: the MCP server for agents (work in progress)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--transport", default="stdio")


def cmd_mcp(args) -> int:
    raise NotImplementedError
