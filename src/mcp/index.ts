/**
 * `io-harness/mcp`: MCP servers' tools inside the boundary. A subpath of its own, so a
 * program that does not use MCP never loads the protocol's SDK.
 */
export type {
  McpConnectOptions,
  McpHttpServer,
  McpServerSpec,
  McpSkippedTool,
  McpStdioServer,
} from './client.js';
export { McpServerError, McpServers } from './client.js';
