#!/usr/bin/env node
// io-harness <command>: the commands of the package.
//   io-harness runs | sessions | show | follow | answer | resume | rewind | cost  (see --help; src/cli)
//   io-harness config explain [key] [--root <dir>] [--user-file <file> | --no-user-file] [--profile <name>]
//   io-harness mcp-server --root <dir> --store <db> [--policy <file.json>] [--http <port>] [--host <addr> [--allow-remote]]
// serves the workspace tools of <dir> over MCP (stdio, or streamable HTTP with --http),
// every call a step of a run kept in <db>, under the policy (default: Policy.default()).
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const USAGE = `usage: io-harness <command> [options]; io-harness <command> --help says more

Reading and acting on a store (--store <file> or a postgres:// URL, default $IO_HARNESS_STORE or ./runs.db; --json for scripts):
TRACE_COMMANDS

Other commands:
       io-harness config explain [key] [--root <dir>] [--user-file <file> | --no-user-file] [--profile <name>]
       io-harness mcp-server --root <dir> --store <db> [--policy <file.json>] [--http <port>] [--host <addr> [--allow-remote]]

Serves the workspace tools of <dir> over MCP: on stdio, or streamable HTTP on
<host>:<port>/mcp with --http (host 127.0.0.1 unless given). A host that is not a
loopback address is refused unless --allow-remote says so. Every call is a step of a
run kept in <db>, decided by the policy in <file.json> (a policy's data, as
policy.toJSON() writes it) or Policy.default().

Over HTTP every request must carry "Authorization: Bearer <token>": the token is
IO_HARNESS_MCP_TOKEN when it is set, else one made at start and printed on stderr.`;

function fail(message) {
  process.stderr.write(`io-harness: ${message}\n\nio-harness --help lists the commands.\n`);
  process.exit(2);
}

/** The largest request body taken over HTTP (a write of 8 MiB, as JSON, with room). */
const MAX_BODY = 12 * 1024 * 1024;

const [command, ...rest] = process.argv.slice(2);
if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
  const { traceCommandsHelp } = await import('../dist/bundle/cli.js');
  (command === undefined ? process.stderr : process.stdout).write(
    `${USAGE.replace('TRACE_COMMANDS', traceCommandsHelp())}\n`,
  );
  process.exit(command === undefined ? 2 : 0);
}
{
  const { TRACE_COMMANDS, runTraceCommand } = await import('../dist/bundle/cli.js');
  if (Object.hasOwn(TRACE_COMMANDS, command)) {
    process.exitCode = await runTraceCommand(command, rest);
    // Nothing the command started is left to finish: its store is closed, its supervisor too.
    process.exit();
  }
}
if (command === 'config') {
  const { runConfigCommand } = await import('./config-command.mjs');
  process.exit(await runConfigCommand(rest));
}
if (command !== 'mcp-server') {
  const { nearestCommand, TRACE_COMMANDS } = await import('../dist/bundle/cli.js');
  const near = nearestCommand(command, [...Object.keys(TRACE_COMMANDS), 'config', 'mcp-server']);
  fail(`there is no command ${JSON.stringify(command)}${near ? `; did you mean \`io-harness ${near}\`?` : ''}`);
}

let values;
try {
  ({ values } = parseArgs({
    args: rest,
    options: {
      root: { type: 'string' },
      store: { type: 'string' },
      policy: { type: 'string' },
      http: { type: 'string' },
      host: { type: 'string' },
      'allow-remote': { type: 'boolean' },
    },
    strict: true,
  }));
} catch (error) {
  fail(error.message);
}
if (!values.root) fail('mcp-server needs --root, the workspace to serve');
if (values.host !== undefined && values.http === undefined) fail('--host is for --http; give the port too');
if (values['allow-remote'] && values.host === undefined)
  fail('--allow-remote is for --host; name the address to listen on (the default, 127.0.0.1, is loopback)');
if (!values.store) fail('mcp-server needs --store, the SQLite file the runs are kept in');

// The calls read, write and run commands in the workspace: served to this machine only, unless said in so many words.
if (values.host !== undefined && !values['allow-remote']) {
  const { addressOf } = await import('../dist/bundle/cli.js');
  const name = values.host.toLowerCase().replace(/\.$/, '');
  const address = addressOf(name.replace(/^\[(.*)\]$/, '$1'));
  const bytes = address?.bytes ?? [];
  // 127.0.0.0/8, ::1, or 127.0.0.0/8 mapped into IPv6 (::ffff:127.x.y.z); a name other than localhost may lead anywhere.
  const loopback =
    name === 'localhost' ||
    (address?.version === 4 && bytes[0] === 127) ||
    (address?.version === 6 && bytes.slice(0, 15).every((byte) => byte === 0) && bytes[15] === 1) ||
    (address?.version === 6 &&
      bytes.slice(0, 10).every((byte) => byte === 0) &&
      bytes[10] === 0xff &&
      bytes[11] === 0xff &&
      bytes[12] === 127);
  if (!loopback)
    fail(
      `--host ${values.host} is not a loopback address: the server would take calls that read, write and run commands in ${values.root} from other machines. It listens on loopback (127.0.0.1, ::1, localhost) unless you add --allow-remote to say you mean it; every request still needs the bearer token.`,
    );
}

const { Policy, Store, Supervisor } = await import('../dist/bundle/index.js');
const { WorkspaceMcpServer } = await import('../dist/bundle/mcp-server.js');
let policy;
if (values.policy) {
  try {
    policy = Policy.from(JSON.parse(readFileSync(values.policy, 'utf8')));
  } catch (error) {
    fail(`--policy ${values.policy}: ${error.message}`);
  }
}
let store;
try {
  store = await Store.open(values.store);
} catch (error) {
  fail(`--store ${values.store}: ${error.message}`);
}
const options = { root: values.root, store, ...(policy ? { policy } : {}) };

if (values.http === undefined) {
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  let server;
  try {
    server = await WorkspaceMcpServer.start(options);
  } catch (error) {
    fail(error.message);
  }
  const stop = async () => {
    await server.close();
    store.close();
    process.exit(0);
  };
  server.mcp.onclose = stop;
  process.stdin.on('end', stop);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, stop);
  await server.connect(new StdioServerTransport());
} else {
  const port = /^\d{1,5}$/.test(values.http) ? Number(values.http) : Number.NaN;
  if (!Number.isInteger(port) || port > 65535) fail(`--http ${JSON.stringify(values.http)} is not a port (0 to 65535)`);
  const token = process.env.IO_HARNESS_MCP_TOKEN || randomBytes(24).toString('hex');
  const expected = Buffer.from(`Bearer ${token}`);
  const authorized = (header) => {
    const given = Buffer.from(typeof header === 'string' ? header : '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const { isInitializeRequest } = await import('@modelcontextprotocol/sdk/types.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const supervisor = await Supervisor.start(store);
  // A bad root or contract is found now, not at the first client.
  try {
    await (await WorkspaceMcpServer.start({ ...options, supervisor })).close();
  } catch (error) {
    fail(error.message);
  }
  const refuse = (response, status, code, message) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
  };
  // One server (and its runs) per client session.
  const sessions = new Map();
  const http = createServer(async (request, response) => {
    try {
      if (new URL(request.url ?? '/', 'http://x').pathname !== '/mcp') {
        response.writeHead(404).end();
        return;
      }
      // Before anything is read or made: a request without the token is refused.
      if (!authorized(request.headers.authorization)) {
        request.resume();
        refuse(response, 401, -32001, 'unauthorized: send Authorization: Bearer <token>');
        return;
      }
      let body = '';
      for await (const chunk of request) {
        body += chunk;
        if (body.length > MAX_BODY) {
          refuse(response, 413, -32600, `the request is larger than ${MAX_BODY} bytes`);
          request.destroy();
          return;
        }
      }
      const parsed = body === '' ? undefined : JSON.parse(body);
      const id = request.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id)?.transport : undefined;
      if (!transport) {
        if (typeof id === 'string') return refuse(response, 404, -32001, 'no such session');
        if (!isInitializeRequest(parsed)) return refuse(response, 400, -32600, 'start a session with initialize');
        const server = await WorkspaceMcpServer.start({ ...options, supervisor });
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => sessions.set(sessionId, { transport, server }),
        });
        transport.onclose = () => {
          if (transport.sessionId) sessions.delete(transport.sessionId);
          void server.close();
        };
        await server.connect(transport);
      }
      await transport.handleRequest(request, response, parsed);
    } catch (error) {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      const parse = error instanceof SyntaxError;
      refuse(response, parse ? 400 : 500, parse ? -32700 : -32603, error.message);
    }
  });
  http.listen(port, values.host ?? '127.0.0.1', () => {
    const address = http.address();
    process.stderr.write(
      `io-harness: serving ${values.root} over MCP at http://${address.address}:${address.port}/mcp\n`,
    );
    if (!process.env.IO_HARNESS_MCP_TOKEN) process.stderr.write(`io-harness: bearer token ${token}\n`);
  });
  const stop = async () => {
    http.close();
    http.closeAllConnections();
    for (const { server } of sessions.values()) await server.close();
    await supervisor.close();
    store.close();
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, stop);
}
