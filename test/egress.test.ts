/**
 * The egress proxy on the real rungs: commands run in a network namespace of their own,
 * whose only route out is the helper's relay to the run's proxy, and the test's own
 * loopback servers count what reaches them. Names are resolved by a resolver the test
 * gives the proxy (this machine has no DNS), so `allowed.test` can stand for a public host
 * and `intranet.allowed.test` for one that resolves to 10.0.0.7. The floor is lifted
 * (IO_HARNESS_ALLOW_LOCAL_ADDRESSES=1) only where a test says so, since its servers are
 * on loopback.
 */
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackApprover, Policy, runWith, TaskContract } from '../dist/index.js';
import { ContainedExecutor, selectBackend } from '../dist/runtime/exec/containment/contained.js';
import { probeContainment } from '../dist/runtime/exec/containment/probe.js';
import { readAuthority } from '../dist/runtime/exec/containment/proxy.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { directExecutor } from '../dist/runtime/exec/executor.js';
import { commandEnvironment } from '../dist/runtime/exec/run-command.js';
import { openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const rungs = hostRungs();
const RUNGS = (['bubblewrap', 'landlock', 'namespaces'] as const).filter((rung) => {
  if (!rungs[rung].ok) console.log(`egress on the ${rung} rung: not tested, not available here: ${rungs[rung].reason}`);
  else if (rung === 'namespaces' && !rungs.helper.ok)
    console.log('egress on the namespaces rung: not tested, the helper that carries the relay is not built here');
  return rungs[rung].ok && rungs.helper.ok;
});

/** A loopback HTTP server that counts its requests; `/redirect` sends the client to `denied.test`. */
async function counting(): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((request, response) => {
    hits.push(`${request.headers.host}${request.url}`);
    if (request.url === '/redirect') {
      response.writeHead(302, { location: `http://denied.test:${port}/landed` });
      response.end();
      return;
    }
    response.end(`reached ${request.url}\n`);
  });
  server.on('connect', (_request, socket) => {
    hits.push('CONNECT');
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { server, port, hits };
}

/** What names resolve to for the proxy: every test name to loopback, `intranet.allowed.test` to 10.0.0.7. */
const lookup = async (host: string) => {
  if (host === 'intranet.allowed.test') return [{ address: '10.0.0.7', family: 4 }];
  if (host.endsWith('.test')) return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`no such name ${host}`), { code: 'ENOTFOUND' });
};

/** Sends one raw request line to the proxy from inside and prints the status line it got back. */
const RAW = `
const [line] = process.argv.slice(1);
const s = require('net').connect(3128, '127.0.0.1');
let got = '';
const show = () => { console.log(got.split('\\r\\n')[0] + ' | ' + got.split('\\r\\n\\r\\n').slice(1).join('')); process.exit(0); };
s.on('connect', () => s.write(line + '\\r\\nHost: x\\r\\n\\r\\n'));
s.on('data', (d) => { got += d; if (/^HTTP\\/1\\.1 200 Connection Established\\r\\n\\r\\n/.test(got)) show(); });
s.on('end', show);
s.on('error', (e) => { console.log('error ' + e.code); process.exit(0); });
setTimeout(show, 3000);
`;

function lifted<T>(run: () => Promise<T>): Promise<T> {
  process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES = '1';
  return run().finally(() => {
    delete process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES;
  });
}

describe.each(RUNGS)('egress through the proxy on the %s rung', (rung) => {
  let target: Awaited<ReturnType<typeof counting>>;
  let root: string;
  let executor: ContainedExecutor;
  const refusals: { rule: string; layer: string; reason: string; callId: string }[] = [];
  const decisions: string[] = [];
  const policy = Policy.default()
    .layer('test')
    .allowExec('*')
    .allowNet('allowed.test')
    .allowNet('*.allowed.test')
    .allowNet('127.0.0.1')
    .denyNet('[::ffff:127.0.0.3]');

  beforeAll(async () => {
    target = await counting();
    // Made here, not by tempWorkspace, which removes it after each test: it lasts the whole block.
    root = mkdtempSync(join(tmpdir(), 'io-harness-egress-'));
    executor = new ContainedExecutor(directExecutor, {
      root,
      policy,
      sandbox: { access: 'workspace-write', writableRoots: [], rung, caps: {} },
      lookup,
      egress: {
        decide: async (at, origin) => {
          const decision = policy.decide({ kind: 'net', host: at.host, port: at.port }, root);
          decisions.push(`${decision.subject} ${decision.effect}`);
          if (decision.effect === 'allow') return { ok: true };
          const refusal = {
            ok: false as const,
            rule: decision.rule ?? 'policy.no-rule',
            layer: decision.layer ?? 'policy',
            reason: `net ${decision.subject} is denied`,
          };
          refusals.push({ ...refusal, callId: origin?.callId ?? '' });
          return refusal;
        },
        refused: (_at, verdict, origin) => refusals.push({ ...verdict, callId: origin?.callId ?? '' }),
      },
    });
    expect(executor.contained()).toMatchObject({ rung, network: 'proxy', egress: 'proxy' });
  });

  afterAll(async () => {
    await executor.close();
    target.server.close();
    rmSync(root, { recursive: true, force: true });
  });

  const run = (argv: string[]) =>
    executor.run({
      argv,
      purpose: 'exec',
      cwd: root,
      timeoutMs: 20_000,
      outputLimit: 64 * 1024,
      env: commandEnvironment(),
      origin: { callId: 'call-1', tool: 'exec' },
    });
  const curl = (...args: string[]) => run(['curl', '-sS', '--max-time', '5', ...args]);
  const raw = (line: string) => run([process.execPath, '-e', RAW, line]);

  it('reaches an allowed host through the proxy, by HTTP and by CONNECT, and nothing else', async () => {
    await lifted(async () => {
      const plain = await curl('-f', `http://allowed.test:${target.port}/plain`);
      expect(plain.stdout).toBe('reached /plain\n');
      const tunnelled = await curl('-f', '-p', `http://ALLOWED.TEST.:${target.port}/tunnel`);
      expect(tunnelled.stdout).toBe('reached /tunnel\n');
    });
    // The server saw the host that was checked, as the client named it once normalised.
    expect(target.hits).toContain(`allowed.test:${target.port}/plain`);
  });

  it('refuses every spelling of loopback, metadata and private addresses at the floor', async () => {
    const before = target.hits.length;
    const spellings = [
      `0x7f.1:${target.port}`,
      `127.1:${target.port}`,
      `2130706433:${target.port}`,
      `0177.0.0.1:${target.port}`,
      `[::1]:${target.port}`,
      `[::ffff:127.0.0.1]:${target.port}`,
      '[64:ff9b::a9fe:a9fe]:80',
      '169.254.169.254:80',
      '[fd00:ec2::254]:80',
      '168.63.129.16:80',
      'metadata.google.internal:80',
      `localhost:${target.port}`,
      // Site-local, and local-use NAT64, which can carry an IPv4 address in bytes other than the last four.
      '[fec0::1]:80',
      '[64:ff9b:1:7f00:0:100:808:808]:80',
      // An allowed name that resolves to 10.x.
      `intranet.allowed.test:${target.port}`,
    ];
    for (const authority of spellings) {
      const answer = await raw(`CONNECT ${authority} HTTP/1.1`);
      expect(answer.stdout, authority).toMatch(/^HTTP\/1\.1 403 .*layer address-floor/);
    }
    expect(target.hits.length).toBe(before);
    const floorRules = refusals.filter((refusal) => refusal.layer === 'address-floor').map((refusal) => refusal.rule);
    expect(new Set(floorRules)).toEqual(
      new Set([
        'floor.loopback',
        'floor.link-local',
        'floor.metadata',
        'floor.unique-local',
        'floor.site-local',
        'floor.nat64-local',
        'floor.private',
      ]),
    );
    expect(refusals.every((refusal) => refusal.callId === 'call-1')).toBe(true);
  });

  it('refuses unlisted hosts, look-alikes, user parts and the proxy itself', async () => {
    const before = target.hits.length;
    await lifted(async () => {
      for (const authority of [
        `unlisted.test:${target.port}`,
        `allowed.test.evil.test:${target.port}`,
        `evilallowed.test:${target.port}`,
      ]) {
        const answer = await raw(`CONNECT ${authority} HTTP/1.1`);
        expect(answer.stdout, authority).toMatch(/^HTTP\/1\.1 403 .*rule policy\.no-rule/);
      }
      for (const authority of [
        `u@allowed.test:${target.port}`,
        `allowed.test:${target.port}@evil.test:80`,
        'allowed.test',
      ]) {
        const answer = await raw(`CONNECT ${authority} HTTP/1.1`);
        expect(answer.stdout, authority).toMatch(/^HTTP\/1\.1 400 .*rule proxy\.malformed/);
      }
      const self = await raw('CONNECT 127.0.0.1:3128 HTTP/1.1');
      expect(self.stdout).toMatch(/^HTTP\/1\.1 403 .*rule proxy\.self/);
      // A user part in an absolute URI is refused, not stripped.
      const userPart = await raw(`GET http://u@allowed.test:${target.port}/x HTTP/1.1`);
      expect(userPart.stdout).toMatch(/^HTTP\/1\.1 400 .*rule proxy\.malformed/);
    });
    expect(target.hits.length).toBe(before);
  });

  it('decides a rule on an address by the address, however the command spells it', async () => {
    await lifted(async () => {
      // 127.0.0.3, denied by a rule written as an IPv4-mapped IPv6 address.
      for (const spelling of ['127.0.0.3', '0x7f000003', '2130706435', '127.3', '0177.0.0.3', '[::ffff:7f00:3]']) {
        const answer = await raw(`CONNECT ${spelling}:${target.port} HTTP/1.1`);
        expect(answer.stdout, spelling).toMatch(
          new RegExp(`^HTTP/1\\.1 403 .*net 127\\.0\\.0\\.3:${target.port} is denied`),
        );
      }
      // 127.0.0.1, allowed: every spelling reaches the same server (the proxy answers 200 once it is connected).
      let connections = 0;
      const count = () => connections++;
      target.server.on('connection', count);
      for (const spelling of ['0x7f.1', '2130706433', '[::ffff:127.0.0.1]']) {
        const answer = await raw(`CONNECT ${spelling}:${target.port} HTTP/1.1`);
        expect(answer.stdout, spelling).toMatch(/^HTTP\/1\.1 200 /);
      }
      target.server.off('connection', count);
      expect(connections).toBe(3);
    });
  });

  it('frames a request body again for the server, so that it cannot be read as a second request', async () => {
    const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: internal.example\r\n\r\n';
    const chunk = `${Buffer.byteLength(smuggled).toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
    const script = `
      const s = require('net').connect(3128, '127.0.0.1');
      let got = '';
      s.on('connect', () => s.write(${JSON.stringify(`GET http://allowed.test:${target.port}/te HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n${chunk}`)}));
      s.on('data', (d) => { got += d; if (got.includes('reached')) { console.log(got.split('\\r\\n')[0]); process.exit(0); } });
      setTimeout(() => { console.log('no answer: ' + got); process.exit(0); }, 3000);`;
    await lifted(async () => {
      const answer = await run([process.execPath, '-e', script]);
      expect(answer.stdout).toMatch(/^HTTP\/1\.1 200/);
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(target.hits).toContain(`allowed.test:${target.port}/te`);
    expect(target.hits.some((hit) => hit.includes('smuggled'))).toBe(false);
  });

  it('does not follow a redirect from an allowed host to a denied one', async () => {
    await lifted(async () => {
      const followed = await curl('-L', `http://allowed.test:${target.port}/redirect`);
      expect(followed.stdout).toMatch(/refused: .*denied\.test/);
    });
    expect(target.hits).toContain(`allowed.test:${target.port}/redirect`);
    expect(target.hits.some((hit) => hit.includes('/landed'))).toBe(false);
  });

  it('has no way out but the proxy: no direct dial, no UDP, no DNS', async () => {
    const before = target.hits.length;
    const direct = await curl('--noproxy', '*', `http://127.0.0.1:${target.port}/direct`);
    expect(direct.exitStatus).not.toBe(0);
    const udp = createSocket('udp4');
    let datagrams = 0;
    udp.on('message', () => datagrams++);
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const script = `
      const d = require('dgram').createSocket('udp4');
      let left = 2;
      const done = () => { if (--left === 0) require('dns').lookup('example.com', (e) => { console.log('dns ' + (e ? e.code : 'resolved')); process.exit(0); }); };
      d.send('x', ${udp.address().port}, '127.0.0.1', done);
      d.send('x', 53, '8.8.8.8', done);
      d.on('error', done);`;
    const sent = await run([process.execPath, '-e', script]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    udp.close();
    expect(datagrams).toBe(0);
    expect(sent.stdout).toMatch(/^dns (?!resolved)/);
    expect(target.hits.length).toBe(before);
  });

  it('reaches a loopback server of the test only with the floor lifted', async () => {
    const before = target.hits.length;
    const floored = await curl(`http://127.0.0.1:${target.port}/floored`);
    expect(floored.stdout).toMatch(/rule floor\.loopback, layer address-floor/);
    expect(target.hits.length).toBe(before);
    const reached = await lifted(() => curl('-f', `http://127.0.0.1:${target.port}/lifted`));
    expect(reached.stdout).toBe('reached /lifted\n');
  });
});

describe('egress in a run', () => {
  it('puts an asked host to the approver at connect time, and records each decision and refusal against the call', async () => {
    if (RUNGS.length === 0) {
      console.log('egress in a run: not tested, no namespace rung with the helper here');
      return;
    }
    const target = await counting();
    const root = tempWorkspace({ 'a.txt': 'a\n' });
    const asked: string[] = [];
    const approver = new CallbackApprover(({ act, subject }) => {
      if (act.kind !== 'net') return 'approve';
      asked.push(subject);
      return subject.startsWith('127.0.0.1:') ? 'approve' : 'deny';
    });
    const policy = Policy.default().layer('app').allowExec('curl *').askNet('127.0.0.1').askNet('localhost');
    const curl = (url: string) => ({
      text: 'fetching',
      toolCalls: [{ name: 'exec', args: { argv: ['curl', '-sS', '--max-time', '5', url] } }],
    });
    const store = await openStore();
    // The run's thread reads the host's environment when it starts: lifted there for the test's loopback server.
    process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES = '1';
    try {
      const { provider } = await serve(
        turns([
          curl(`http://127.0.0.1:${target.port}/asked`),
          curl(`http://localhost:${target.port}/denied`),
          { text: 'done' },
        ]),
      );
      const result = await runWith(TaskContract.workspace('fetch', root), provider, store, policy, approver);
      expect(result.outcome.kind).toBe('finished');
      expect(asked).toEqual([`127.0.0.1:${target.port}`, `localhost:${target.port}`]);
      expect(target.hits).toEqual([`127.0.0.1:${target.port}/asked`]);
      const steps = store.steps(result.runId);
      const observations = steps.flatMap((step) => step.observations.map((o) => o.content));
      expect(observations[0]).toContain('reached /asked');
      expect(observations[1]).toMatch(/refused: net localhost:\d+ needs approval and the approver denied it/);
      const events = store.events(result.runId);
      expect(events.find((event) => event.type === 'contained')).toMatchObject({
        network: 'proxy',
        egress: 'proxy',
        // The canary's CONNECT through the proxy was answered, not dialled, and is not in the trace as a decision.
        probe: { proxy: 'enforced' },
      });
      const decided = events.flatMap((event) =>
        event.type === 'policy-decision' && event.act === 'net' ? [event] : [],
      );
      expect(decided.map((event) => `${event.subject} ${event.effect} ${event.answer}`)).toEqual([
        `127.0.0.1:${target.port} ask approve`,
        `localhost:${target.port} ask deny`,
      ]);
      const refusal = events.find((event) => event.type === 'refusal');
      expect(refusal).toMatchObject({ tool: 'exec', layer: 'app' });
      expect(refusal?.type === 'refusal' && refusal.callId).toBe(steps[1]?.observations[0]?.callId);
    } finally {
      delete process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES;
      target.server.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('says before a run what its commands get', () => {
    const contract = TaskContract.workspace('x', '/tmp');
    const report = selectBackend(contract, Policy.default().layer('a').allowNet('registry.npmjs.org'));
    if (RUNGS.length > 0) expect(report).toMatchObject({ network: 'proxy', egress: 'proxy' });
    else expect(report.egress).toBe('not established');
    expect(selectBackend(contract, Policy.default())).toMatchObject({
      egress: report.rung === 'floor' ? 'not established' : 'denied',
    });
  });

  it('probes a proxy that never answers as partial, not as no proxy', async () => {
    // A listener that takes the canary's CONNECT and says nothing.
    const silent = createNetServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const inside = join(mkdtempSync(join(tmpdir(), 'io-harness-probe-')), 'inside');
    try {
      const report = await probeContainment(
        (argv, env) =>
          directExecutor.run({
            argv,
            env: { ...env, HTTP_PROXY: `http://127.0.0.1:${port}` },
            cwd: tmpdir(),
            timeoutMs: 10_000,
            outputLimit: 16 * 1024,
            purpose: 'probe',
          }),
        inside,
      );
      expect(report.proxy).toBe('partial');
    } finally {
      silent.close();
      rmSync(dirname(inside), { recursive: true, force: true });
    }
  });

  it('reads a CONNECT target strictly', () => {
    expect(readAuthority('Example.COM.:443')).toEqual({ host: 'example.com', port: 443 });
    expect(readAuthority('[::1]:80')).toEqual({ host: '::1', port: 80 });
    for (const bad of [
      'example.com',
      'u@example.com:443',
      'example.com:0',
      'example.com:65536',
      'exa mple.com:80',
      'a..b:80',
      ':80',
      'x.com:80 ',
    ]) {
      expect(readAuthority(bad), bad).toBeNull();
    }
  });
});

describe('net rules on addresses', () => {
  const policy = Policy.default()
    .layer('test')
    .allowNet('*')
    .denyNet('127.0.0.2')
    .denyNet('[2001:db8::1]')
    .denyNet('[2001:db8::5]:443');
  const decide = (host: string, port = 443) => policy.decide({ kind: 'net', host, port }, '/').effect;

  it('matches an IPv4 rule in every spelling of its address, and an IPv6 rule however the address is written', () => {
    for (const host of [
      '127.0.0.2',
      '0x7f000002',
      '2130706434',
      '127.2',
      '::ffff:127.0.0.2',
      '::ffff:7f00:2',
      '::ffff:127.0.0.2%lo',
    ])
      expect(decide(host), host).toBe('deny');
    for (const host of ['2001:db8::1', '2001:0db8:0:0:0:0:0:1', '[2001:DB8::0:1]'])
      expect(decide(host), host).toBe('deny');
    expect(decide('2001:db8::5', 443)).toBe('deny');
    expect(decide('2001:db8::5', 80)).toBe('allow');
    expect(decide('127.0.0.4')).toBe('allow');
  });

  it('refuses an IPv6 pattern written without brackets where it cannot be read as one address', () => {
    expect(() => Policy.default().denyNet('2001:db8::*')).toThrow(/an IPv6 address in a net rule goes in brackets/);
  });
});
