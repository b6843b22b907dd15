// Builds the trace viewer's page (viewer/) into dist/viewer/page, which the package ships
// and src/viewer/server.ts serves. One bundle of preact and htm: nothing is fetched at run time.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/viewer/page', import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: false,
  },
});
