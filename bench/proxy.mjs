// The egress proxy's cost: a 50 MB download from a loopback server (another process)
// straight, and through the proxy's CONNECT tunnel on its UNIX socket (the path a
// contained command's connection takes after the relay), alternated in one process, the
// floor lifted for the loopback server. Prints each one's MB/s and the proxied share of
// direct, and the p50 time to an established connection each way.
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { EgressProxy } from '../dist/runtime/exec/containment/proxy.js';
import { tempDir } from './support/temp.mjs';

process.env.IO_HARNESS_ALLOW_LOCAL_ADDRESSES = '1';
const MB = Number(process.env.BENCH_MB ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const CONNECTS = Number(process.env.BENCH_CONNECTS ?? 300);
const server = spawn(
  process.execPath,
  [
    '-e',
    `const chunk = Buffer.alloc(1 << 20, 120); const size = ${MB};
     require('http').createServer((q, r) => { r.writeHead(200, { 'content-length': size * chunk.length });
       let left = size; const more = () => { while (left > 0) { left--; if (!r.write(chunk)) return r.once('drain', more); } r.end(); }; more(); })
       .listen(0, '127.0.0.1', function () { console.log(this.address().port); });`,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const port = await new Promise((resolve) => server.stdout.once('data', (data) => resolve(Number(String(data).trim()))));
const proxy = new EgressProxy({ gate: { decide: async () => ({ ok: true }), refused: () => undefined } });
const socket = join(tempDir('io-harness-bench-proxy-'), 'proxy.sock');
const listener = await proxy.listen(socket, null);

/** A socket to the server: straight, or tunnelled through the proxy. */
function open(proxied) {
  return new Promise((resolve, reject) => {
    if (!proxied) {
      const direct = connect(port, '127.0.0.1', () => resolve(direct)).on('error', reject);
      return;
    }
    const tunnel = connect(socket, () => tunnel.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: x\r\n\r\n`));
    tunnel.on('error', reject);
    let head = '';
    const onData = (data) => {
      head += data;
      if (!head.includes('\r\n\r\n')) return;
      tunnel.off('data', onData);
      if (!head.startsWith('HTTP/1.1 200')) return reject(new Error(head));
      resolve(tunnel);
    };
    tunnel.on('data', onData);
  });
}

async function download(proxied) {
  const sock = await open(proxied);
  const start = performance.now();
  const bytes = await new Promise((resolve, reject) => {
    const req = request({ createConnection: () => sock, host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let total = 0;
      res.on('data', (chunk) => {
        total += chunk.length;
      });
      res.on('end', () => resolve(total));
    });
    req.on('error', reject);
    req.end();
  });
  if (bytes !== MB * 1024 * 1024) throw new Error(`got ${bytes} bytes`);
  sock.destroy();
  return MB / ((performance.now() - start) / 1000);
}

const rates = { direct: [], proxied: [] };
for (let round = 0; round < ROUNDS + 1; round++) {
  for (const proxied of [false, true]) {
    const rate = await download(proxied);
    if (round > 0) rates[proxied ? 'proxied' : 'direct'].push(rate);
  }
}
const connects = { direct: [], proxied: [] };
for (let i = 0; i < CONNECTS; i++) {
  for (const proxied of [false, true]) {
    const start = performance.now();
    const sock = await open(proxied);
    connects[proxied ? 'proxied' : 'direct'].push(performance.now() - start);
    sock.destroy();
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const direct = median(rates.direct);
const proxied = median(rates.proxied);
console.log(
  `download ${MB} MB, median of ${ROUNDS}: direct ${direct.toFixed(0)} MB/s, through the proxy ${proxied.toFixed(0)} MB/s (${(proxied / direct).toFixed(2)} of direct)`,
);
const cd = median(connects.direct);
const cp = median(connects.proxied);
console.log(
  `connect p50 over ${CONNECTS}: direct ${cd.toFixed(3)} ms, through the proxy ${cp.toFixed(3)} ms (+${(cp - cd).toFixed(3)} ms)`,
);
await listener.close();
await proxy.close();
server.kill();
