/**
 * The probe: before a run's first command, a canary child on the run's rung tries what a
 * command must not do, and the harness, not the child, says what happened. It writes a
 * file outside the grants and one inside; dials a TCP and a UDP listener the harness owns
 * on loopback (the listener counts what reaches it); signals the harness's process; and
 * looks for a variable of the harness's environment, in its own and through
 * /proc/<harness>/environ. Each arm is `enforced`, `partial` or `not established`.
 */
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CommandResult } from '../run-command.js';
import { commandEnvironment } from '../run-command.js';

export type Arm = 'enforced' | 'partial' | 'not established';

export interface ProbeReport {
  /** A write outside the grants refused, and one inside made. */
  filesystem: Arm;
  /** A TCP connect and a UDP datagram to the harness's own listeners, neither reaching them. */
  network: Arm;
  /** The harness's process not signalled. */
  signals: Arm;
  /** A variable of the harness's environment in neither the child's nor /proc/<harness>/environ. */
  environment: Arm;
  /**
   * Where the run's commands go out through the egress proxy: a CONNECT through it to the
   * harness's TCP listener: `enforced` when the proxy refused it (the address floor), `not
   * established` when it opened the tunnel, `partial` when it did not answer in time; `no
   * proxy` for a run without one.
   */
  proxy: Arm | 'no proxy';
  /** What could not be probed, and why (the canary did not start, say). */
  note: string | null;
}

/** The canary: the paths, ports and pid it is given, and what it saw, as one JSON line. */
const CANARY = `
const [outside, inside, tcp, udp, pid, name] = process.argv.slice(1);
const fs = require('fs');
const seen = {};
try { fs.writeFileSync(outside, 'x'); } catch (e) { seen.outside = e.code; }
try { fs.writeFileSync(inside, 'x'); } catch (e) { seen.inside = e.code; }
try { process.kill(Number(pid), 0); seen.signal = 'sent'; } catch (e) { seen.signal = e.code; }
seen.env = name in process.env;
try { seen.procEnviron = fs.readFileSync('/proc/' + pid + '/environ').length > 0; } catch (e) { seen.procEnviron = false; }
let pending = 3;
const done = () => { if (--pending === 0) { console.log(JSON.stringify(seen)); process.exit(0); } };
const socket = require('net').connect(Number(tcp), '127.0.0.1');
socket.on('connect', () => { socket.end(); done(); }).on('error', () => done());
const dgram = require('dgram').createSocket('udp4');
dgram.send('x', Number(udp), '127.0.0.1', () => { dgram.close(); done(); });
const proxy = process.env.HTTP_PROXY;
if (!proxy) { seen.proxy = 'none'; done(); } else {
  const url = new URL(proxy);
  const tunnel = require('net').connect(Number(url.port), url.hostname);
  let head = '';
  tunnel.on('connect', () => tunnel.write('CONNECT 127.0.0.1:' + tcp + ' HTTP/1.1\\r\\nHost: probe\\r\\n\\r\\n'));
  tunnel.on('data', (d) => { head += d; if (head.includes('\\r\\n')) { seen.proxy = head.split(' ')[1]; tunnel.destroy(); done(); } });
  tunnel.on('error', (e) => { seen.proxy = 'error ' + e.code; done(); });
}
setTimeout(() => { console.log(JSON.stringify(seen)); process.exit(0); }, 2000);
`;

function arm(ok: number, of: number): Arm {
  return ok === of ? 'enforced' : ok === 0 ? 'not established' : 'partial';
}

/**
 * Runs the canary through `run` (the run's own wrapping), with `inside` a path the run may
 * write. Never throws: an arm that could not be probed says so.
 */
export async function probeContainment(
  run: (argv: string[], env: NodeJS.ProcessEnv) => Promise<CommandResult>,
  inside: string,
): Promise<ProbeReport> {
  const outsideDir = mkdtempSync(join(tmpdir(), 'io-harness-probe-'));
  const outside = join(outsideDir, 'written');
  const name = `IO_HARNESS_CANARY_${randomBytes(6).toString('hex').toUpperCase()}`;
  let tcpSeen = 0;
  let udpSeen = 0;
  const tcp = createServer((socket) => {
    tcpSeen++;
    socket.destroy();
  });
  const udp = createSocket('udp4');
  udp.on('message', () => udpSeen++);
  try {
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const tcpPort = (tcp.address() as { port: number }).port;
    const udpPort = udp.address().port;
    // The canary variable is in the environment the run's commands are built from; the allow-list must drop it.
    const env = commandEnvironment({ ...process.env, [name]: 'canary' });
    const result = await run(
      [process.execPath, '-e', CANARY, outside, inside, String(tcpPort), String(udpPort), String(process.pid), name],
      env,
    );
    // Datagrams on loopback arrive at once, but give them the event loop a turn.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const line = result.stdout.trim().split('\n').pop() ?? '';
    let seen: { inside?: string; signal?: string; env?: boolean; procEnviron?: boolean; proxy?: string } | null = null;
    try {
      seen = JSON.parse(line);
    } catch {
      seen = null;
    }
    if (!seen) {
      const why = result.started
        ? `the canary said nothing readable (${result.stderr.trim().slice(0, 200)})`
        : result.error;
      return {
        filesystem: 'not established',
        network: 'not established',
        signals: 'not established',
        environment: 'not established',
        proxy: 'not established',
        note: `the probe did not run: ${why}`,
      };
    }
    const insideMade = existsSync(inside);
    return {
      filesystem: existsSync(outside) ? 'not established' : insideMade ? 'enforced' : 'partial',
      network: arm((tcpSeen === 0 ? 1 : 0) + (udpSeen === 0 ? 1 : 0), 2),
      signals: seen.signal === 'sent' ? 'not established' : 'enforced',
      environment: arm((seen.env ? 0 : 1) + (seen.procEnviron ? 0 : 1), 2),
      // The proxy's own answer decides (the listener also counts the canary's direct dial):
      // a refusal (403) holds, a tunnel (200) does not, no answer in time is neither.
      proxy:
        seen.proxy === 'none'
          ? 'no proxy'
          : seen.proxy === '403'
            ? 'enforced'
            : seen.proxy === '200'
              ? 'not established'
              : 'partial',
      note: insideMade ? null : `the canary could not write inside the grants (${seen.inside ?? 'unknown'})`,
    };
  } finally {
    tcp.close();
    udp.close();
    rmSync(outsideDir, { recursive: true, force: true });
    rmSync(inside, { force: true });
  }
}
