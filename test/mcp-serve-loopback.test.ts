/**
 * Our MCP server's HTTP mode (`io-harness mcp-server --http`) serves calls that read, write
 * and run commands in a workspace, so like the viewer it listens on loopback only: a
 * `--host` that is not a loopback address is refused before anything listens, naming
 * `--allow-remote`, the one way to say it is meant. Real server processes on port 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempStorePath } from './support/processes.js';
import { later, tempWorkspace } from './support/workspace.js';

const BIN = fileURLToPath(new URL('../bin/io-harness.mjs', import.meta.url));

/** Starts the server with `args` after the usual ones; resolves when it listens (its URL) or exits (its code and stderr). */
async function start(
  args: string[],
): Promise<{ url: string; token: string } | { code: number | null; stderr: string }> {
  const root = tempWorkspace({ 'a.txt': 'alpha\n' });
  const child: ChildProcess = spawn(
    process.execPath,
    [BIN, 'mcp-server', '--root', root, '--store', tempStorePath(), '--http', '0', ...args],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, IO_HARNESS_MCP_TOKEN: '' } },
  );
  later(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });
  return new Promise((resolve) => {
    let seen = '';
    child.stderr?.on('data', (chunk) => {
      seen += chunk;
      const url = /at (http:\/\/\S+\/mcp)/.exec(seen)?.[1];
      const token = /bearer token (\S+)/.exec(seen)?.[1];
      if (url && token) resolve({ url, token });
    });
    child.once('exit', (code) => resolve({ code, stderr: seen }));
  });
}

/** What a POST with the token, not starting a session, gets back: 400 (start a session with initialize) from our server. */
async function answers(url: string, token: string): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  await response.body?.cancel();
  return response.status;
}

describe("our MCP server's HTTP mode", () => {
  it('refuses a host that is not loopback, naming --allow-remote, and listens on nothing', async () => {
    for (const host of ['0.0.0.0', '::', '192.0.2.10', 'example.com']) {
      const started = await start(['--host', host]);
      expect('code' in started, host).toBe(true);
      if (!('code' in started)) continue;
      expect(started.code, host).toBe(2);
      expect(started.stderr).toContain(`--host ${host} is not a loopback address`);
      expect(started.stderr).toContain('add --allow-remote to say you mean it');
    }
    // --allow-remote alone says nothing about where: refused too.
    const alone = await start(['--allow-remote']);
    expect(alone).toMatchObject({ code: 2 });
    expect('stderr' in alone && alone.stderr).toContain('--allow-remote is for --host');
  });

  it('listens on loopback by default and on a loopback --host, and beyond only when told so in so many words', async () => {
    for (const args of [[], ['--host', 'localhost'], ['--host', '127.0.0.1']]) {
      const started = await start(args);
      if (!('url' in started)) throw new Error(`did not listen with ${args.join(' ')}: ${started.stderr}`);
      expect(new URL(started.url).hostname, args.join(' ')).toMatch(/^(127\.0\.0\.1|\[::1\])$/);
      expect(await answers(started.url, started.token)).toBe(400);
    }
    const wide = await start(['--host', '0.0.0.0', '--allow-remote']);
    if (!('url' in wide)) throw new Error(`did not listen: ${wide.stderr}`);
    expect(new URL(wide.url).hostname).toBe('0.0.0.0');
    const port = new URL(wide.url).port;
    expect(await answers(`http://127.0.0.1:${port}/mcp`, wide.token)).toBe(400);
  });
});
