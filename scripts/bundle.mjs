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
import { basename, dirname, join } from 'node:path';
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

/** Bundles `input` into dist/bundle/, written anew; the modules each chunk holds, as rolldown read them. */
async function bundle(input) {
  rmSync(OUT, { recursive: true, force: true });
  const { output } = await build({
    input,
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
  // Its own runtime helpers are modules too, with names no file has: only tsc's files are read.
  return output.flatMap((chunk) => (chunk.type === 'chunk' ? chunk.moduleIds.filter((id) => id.startsWith(DIST)) : []));
}

/**
 * What the bundle needs beside its entries, found in the modules it holds (so a stale file
 * tsc left in dist/ counts for nothing): each module a thread is started on, named by the
 * URL its starter builds, becomes an entry of the same name beside the chunks so the same
 * URL finds it; any other file so named (the pools' CommonJS stand-in) is copied there.
 * Two of one name, or one named like an entry point, fail the build.
 */
function beside(modules, entries) {
  const threads = {};
  const copies = {};
  for (const file of modules) {
    for (const [, , name] of readFileSync(file, 'utf8').matchAll(NAMED_BESIDE)) {
      const target = join(dirname(file), name);
      if (!existsSync(target)) throw new Error(`${file} names ./${name}, which tsc did not write beside it`);
      const stem = name.replace(/\.js$/, '');
      const taken = entries[stem] ?? threads[stem] ?? copies[name];
      if (taken !== undefined && taken !== target)
        throw new Error(`two files would be ./${name} in the bundle: ${taken} and ${target}`);
      if (name.endsWith('.js')) threads[stem] = target;
      else copies[name] = target;
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

// Bundled again while that finds thread entries it did not hold (a thread's modules may start threads too).
const entries = Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, join(DIST, file)]));
let input = entries;
let found = beside(await bundle(input), entries);
while (Object.keys(found.threads).some((name) => !(name in input))) {
  input = { ...entries, ...found.threads };
  found = beside(await bundle(input), entries);
}
for (const [name, file] of Object.entries(found.copies)) copyFileSync(file, join(OUT, basename(name)));
checkBeside();
