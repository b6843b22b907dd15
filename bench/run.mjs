// npm run bench — runs every benchmark in its own process, one after another, and
// prints each one's JSON line. `npm run bench -- fanout` runs only the ones named.
// Figures are quoted in docs/MEASUREMENTS.md as ratios against a baseline measured in
// the same run; the machines are shared, so absolute times drift.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const benches = [
  ['commit-throughput', ['commit-throughput.mjs']],
  ['commit-cpu', ['commit-cpu.mjs']],
  ['fanout-gaps', ['fanout-gaps.mjs']],
  ['rules-cost', ['rules-cost.mjs']],
  ['step-overhead', ['step-overhead.mjs']],
  ['sequential-steps', ['sequential-steps.mjs']],
  ['workspace-step', ['workspace-step.mjs']],
  ['file-write', ['file-write.mjs']],
  ['tool-roundtrip', ['tool-roundtrip.mjs']],
  ['memory-runs', ['memory-runs.mjs']],
  ['first-agent', ['first-agent.mjs']],
  ['cold-start', ['cold-start.mjs']],
  ['policy', ['policy.mjs']],
  ['containment', ['containment.mjs']],
  ['proxy', ['proxy.mjs']],
  ['scrub', ['scrub.mjs']],
  ['retention', ['retention.mjs']],
  ['sessions', ['sessions.mjs']],
  ['mcp', ['mcp.mjs']],
  ['lsp', ['lsp.mjs']],
  ['context', ['context.mjs']],
  ['context-growth', ['context-growth.mjs']],
  ['notes', ['notes.mjs']],
  ['otel', ['otel.mjs']],
  ['viewer', ['viewer.mjs']],
  ['streaming', ['streaming.mjs']],
  ['fanout-16', ['fanout.mjs', '16']],
  ['fanout-64', ['fanout.mjs', '64']],
  ['fanout-hosts', ['fanout-hosts.mjs', '64']],
  ['wide-fanout-100', ['wide-fanout.mjs', '100']],
  ['wide-fanout-1000', ['wide-fanout.mjs', '1000']],
];
const wanted = process.argv.slice(2);
for (const [name, [file, ...args]] of benches) {
  if (wanted.length > 0 && !wanted.some((w) => name.startsWith(w))) continue;
  const out = spawnSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url)), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (out.status !== 0) {
    console.error(`${name} failed with status ${out.status}`);
    process.exitCode = 1;
  }
  process.stdout.write(out.stdout);
}
