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
import { copyFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
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
};

/** Not tsc's: the bundle itself, and the viewer's page (vite's, for the browser). */
const NOT_MODULES = [OUT, join(DIST, 'viewer', 'page')];

/** Every .js file tsc wrote. */
function modules(dir = DIST) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return NOT_MODULES.includes(path) ? [] : modules(path);
    return entry.name.endsWith('.js') ? [path] : [];
  });
}

/**
 * The modules a thread is started on, found where the code names them
 * (`new URL('./agent-worker.js', import.meta.url)`): each becomes an entry of the same name
 * beside the chunk that names it, so the same relative URL finds it. Two of one name fail.
 */
function threadEntries() {
  const found = {};
  for (const file of modules()) {
    for (const [, name] of readFileSync(file, 'utf8').matchAll(/new URL\('\.\/([\w-]+)\.js', import\.meta\.url\)/g)) {
      const path = join(file, '..', `${name}.js`);
      if (found[name] && found[name] !== path) throw new Error(`two thread entries are named ${name}.js`);
      found[name] = path;
    }
  }
  return found;
}

const input = {
  ...Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, join(DIST, file)])),
  ...threadEntries(),
};
rmSync(OUT, { recursive: true, force: true });
await build({
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
// The CommonJS stand-in a pool's threads load first (src/runtime/pool-entry.ts), beside the chunks that name it.
copyFileSync(join(DIST, 'runtime', 'thread-entry.cjs'), join(OUT, 'thread-entry.cjs'));
