"""MCP client test driver: the official MCP Python SDK (`mcp` on PyPI) against disparo.

Usage: client.py <mcp url> <write token> <read token> <channel id> <template id>
Prints one JSON object with what the SDK saw; tests/mcp.rs asserts on it.
"""

import asyncio
import contextlib
import json
import sys

from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@contextlib.asynccontextmanager
async def connect(url, token):
    """The SDK's streamable HTTP transport with the bearer token on every request."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def result_json(result):
    """A tools/call result as the SDK parsed it."""
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return {
        "is_error": bool(result.is_error),
        "text": json.loads(text) if text else None,
        "structured": result.structured_content,
    }


async def main():
    url, write_token, read_token, channel_id, template_id = sys.argv[1:6]
    channel_id, template_id = int(channel_id), int(template_id)
    out = {}
    async with connect(url, write_token) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            out["protocol"] = init.protocol_version
            tools = await session.list_tools()
            out["tools"] = {t.name: t.input_schema for t in tools.tools}
            out["list_channels"] = result_json(await session.call_tool("list_channels", {}))
            out["dry_run"] = result_json(
                await session.call_tool(
                    "create_campaign",
                    {
                        "name": "Simulação",
                        "template_id": template_id,
                        "channels": [{"channel_id": channel_id, "weight": 1}],
                        "dry_run": True,
                        "recipients": [
                            {"phone": "+55 11 99999-0001", "vars": {"nome": "Ana"}},
                            {"phone": "5511999990001", "vars": {"nome": "Ana"}},
                            {"phone": "12", "vars": {"nome": "Bia"}},
                            {"phone": "5511999990002", "vars": {}},
                        ],
                    },
                )
            )
            out["health"] = result_json(
                await session.call_tool("channel_health", {"channel_id": channel_id})
            )
            out["send"] = result_json(
                await session.call_tool(
                    "send_template",
                    {
                        "channel_id": channel_id,
                        "to": "5511988887777",
                        "template_id": template_id,
                        "vars": {"nome": "Caio"},
                    },
                )
            )
    async with connect(url, read_token) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["read_send"] = result_json(
                await session.call_tool(
                    "send_template",
                    {
                        "channel_id": channel_id,
                        "to": "5511988887777",
                        "template_id": template_id,
                        "vars": {"nome": "Caio"},
                    },
                )
            )
            out["read_list"] = result_json(await session.call_tool("list_channels", {}))
    # The SDK's high-level client in its default mode first probes the newer stateless
    # revision (`server/discover`) and falls back to the handshake this server speaks.
    async with create_mcp_http_client(
        headers={"Authorization": f"Bearer {read_token}"}
    ) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            out["auto_mode_tools"] = sorted(t.name for t in tools.tools)
    print(json.dumps(out))


asyncio.run(main())
