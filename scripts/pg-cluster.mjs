// A throwaway PostgreSQL cluster, for the tests and the benchmarks: made with initdb in a
// temp directory, served on a free loopback port, stopped and removed by stop(). As root,
// initdb and the server run as the `postgres` user (PostgreSQL refuses to run as root).
// Finds initdb on the PATH, else under Debian's /usr/lib/postgresql/<newest>/bin.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

function binDir() {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((name) => existsSync(join(root, name, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error('no initdb on the PATH or under /usr/lib/postgresql (install it: apt-get install -y postgresql)');
  return join(root, versions[0], 'bin');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/**
 * Makes and starts a cluster; throws, saying why, when it cannot. `settings` are added to
 * the server's (`-c name=value` each), e.g. `{ fsync: 'off' }` for tests.
 */
export async function startCluster({ prefix = 'io-harness-pg-', settings = {} } = {}) {
  const bin = binDir();
  const root = process.getuid?.() === 0;
  // As root the temp directory must be one the postgres user can reach.
  const dir = mkdtempSync(join(root ? '/tmp' : tmpdir(), prefix));
  const data = join(dir, 'data');
  let user;
  if (root) {
    try {
      user = {
        uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
      };
    } catch {
      rmSync(dir, { recursive: true, force: true });
      throw new Error('running as root, and there is no postgres user to run the server as');
    }
    chownSync(dir, user.uid, user.gid);
  }
  const run = (command, args) => {
    const result = spawnSync(join(bin, command), args, { encoding: 'utf8', ...(user ?? {}), cwd: dir });
    if (result.status !== 0) {
      const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').slice(-2000) : '';
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`${command} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}${log}`);
    }
  };
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    "-c listen_addresses='127.0.0.1'",
    `-c unix_socket_directories='${dir}'`,
    '-c max_connections=400',
    ...Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');
  run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '60', 'start']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop() {
      spawnSync(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], { ...(user ?? {}), cwd: dir });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
