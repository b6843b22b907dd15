/**
 * `io-harness/mcp-server`: our workspace tools served over MCP, on stdio or streamable
 * HTTP, every call a step of a run of our own (see ./server.ts).
 */
export type { WorkspaceMcpServerOptions } from './server.js';
export { WorkspaceMcpServer } from './server.js';
