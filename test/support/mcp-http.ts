/** A streamable-HTTP MCP server on loopback for the tests: a server of its own for every request (stateless). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { later } from './workspace.js';

/** Serves what `build` makes for each request at `/mcp`, closed at the test's end; its URL. */
export async function serveMcpOverHttp(build: () => Server | McpServer): Promise<string> {
  const http = createServer(async (request, response) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    let body = '';
    for await (const chunk of request) body += chunk;
    await server.connect(transport);
    await transport.handleRequest(request, response, body === '' ? undefined : JSON.parse(body));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  later(() => new Promise<void>((resolve) => http.close(() => resolve())));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
}
