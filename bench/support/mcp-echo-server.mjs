// An MCP server on stdio with `echo` (returns its text) and, given a count as its argument,
// that many more tools, each with a small schema of its own (for the catalogue's figures).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench', version: '1.0.0' });
server.registerTool(
  'echo',
  { description: 'Returns what it is given.', inputSchema: { text: z.string() } },
  async ({ text }) => ({
    content: [{ type: 'text', text }],
  }),
);
const more = Number(process.argv[2] ?? 0);
for (let i = 0; i < more; i++) {
  server.registerTool(
    `tool_${String(i).padStart(3, '0')}`,
    {
      description: `Tool number ${i}: looks up an item by id and returns its fields.`,
      inputSchema: { id: z.string(), fields: z.array(z.string()).optional(), limit: z.number().int().optional() },
    },
    async ({ id }) => ({ content: [{ type: 'text', text: id }] }),
  );
}
await server.connect(new StdioServerTransport());
process.stdin.on('end', () => process.exit(0));
