// Bundles what tsc wrote to dist/ into dist/bundle/, which is what the package exports: one
// file for each entry (the package's entry points, and each module a thread is started on)
// and shared chunks, in place of some three hundred modules. A process or a thread pays for
// every module it loads, so the bundle is what makes a script's cold start affordable (see
// docs/ARCHITECTURE.md, "The bundle"). dist/ itself is left as tsc wrote it: the type
// declarations are there, and the test suite imports its modules one by one.
//
// Nothing but io-harness's own modules goes into the bundle: every package and Node's
// built-ins stay imports, found and loaded as before. What a dynamic import loads (the
// workspace's modules, a provider's wire) stays a chunk of its own, loaded when it is.
// `node scripts/bundle.mjs` (run by `npm run build`, after tsc).
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const OUT = join(DIST, 'bundle');

/** The package's entry points (package.json's `exports`, by subpath), each a module tsc wrote. */
const ENTRIES = {
  index: 'index.js',
  testing: 'testing/index.js',
  mcp: 'mcp/index.js',
  'mcp-server': 'mcp/serve.js',
  otel: 'otel/index.js',
  eval: 'eval/index.js',
  viewer: 'viewer/server.js',
  postgres: 'store/postgres/index.js',
  // Not exported: what the command line (bin/) loads besides the index.
  cli: 'cli/index.js',
};

/** A file named by the code as `new URL('./name', import.meta.url)`, however it is quoted or wrapped. */
const NAMED_BESIDE = /new URL\(\s*(['"`])\.\/([\w.-]+)\1\s*,\s*import\.meta\.url\s*\)/g;
/** A module imported by relative path: statically, re-exported, or dynamically with a literal. */
const RELATIVE_IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}\/[^'"]+)\1/g;

/**
 * What the bundle needs beside the entries, found by following the entries' imports (so a
 * stale file tsc left in dist/ counts for nothing): each module a thread is started on,
 * named by the URL its starter builds, becomes an entry of the same name beside the chunks
 * so the same URL finds it; any other file so named (the pools' CommonJS stand-in) is
 * copied there. Two of one name, or one named like an entry point, fail the build.
 */
function beside(entries) {
  const threads = {};
  const copies = {};
  const seen = new Set();
  const queue = Object.values(entries);
  while (queue.length > 0) {
    const file = queue.shift();
    if (seen.has(file)) continue;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const [, , spec] of source.matchAll(RELATIVE_IMPORT)) {
      const target = resolve(dirname(file), spec);
      if (target.endsWith('.js') && existsSync(target)) queue.push(target);
    }
    for (const [, , name] of source.matchAll(NAMED_BESIDE)) {
      const target = join(dirname(file), name);
      if (!existsSync(target)) throw new Error(`${file} names ./${name}, which tsc did not write beside it`);
      const stem = name.replace(/\.js$/, '');
      const taken = entries[stem] ?? threads[stem] ?? copies[name];
      if (taken !== undefined && taken !== target)
        throw new Error(`two files would be ./${name} in the bundle: ${taken} and ${target}`);
      if (name.endsWith('.js')) {
        threads[stem] = target;
        queue.push(target);
      } else copies[name] = target;
    }
  }
  return { threads, copies };
}

/** Every URL a chunk builds beside itself names a file the bundle holds, or the build fails. */
function checkBeside() {
  const held = new Set(readdirSync(OUT));
  for (const chunk of readdirSync(OUT).filter((name) => name.endsWith('.js'))) {
    for (const [, , name] of readFileSync(join(OUT, chunk), 'utf8').matchAll(NAMED_BESIDE))
      if (!held.has(name)) throw new Error(`dist/bundle/${chunk} names ./${name}, which the bundle does not hold`);
  }
}

const entries = Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, join(DIST, file)]));
const { threads, copies } = beside(entries);
rmSync(OUT, { recursive: true, force: true });
await build({
  input: { ...entries, ...threads },
  platform: 'node',
  // Only io-harness's own modules are bundled: a package or a built-in is imported as it was.
  external: (id) => !id.startsWith('.') && !id.startsWith('/'),
  logLevel: 'warn',
  output: {
    dir: OUT,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: '[name]-[hash].js',
    // Errors and tools are named in messages and traces: the names stay as written.
    keepNames: true,
    // Modules run in the order they did unbundled, whatever chunk each lands in.
    strictExecutionOrder: true,
  },
});
for (const [name, file] of Object.entries(copies)) copyFileSync(file, join(OUT, basename(name)));
checkBeside();
