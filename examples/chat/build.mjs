// Builds the chat page (page/: React, @ai-sdk/react and htm) into one bundle in `outDir`.
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

export async function buildPage(outDir) {
  await build({
    root: fileURLToPath(new URL('./page', import.meta.url)),
    base: './',
    // React's 'use client' markers are dropped in a bundle, which rolldown warns of: not a problem here.
    logLevel: 'error',
    configFile: false,
    build: { outDir, emptyOutDir: true, sourcemap: false, modulePreload: false, target: 'es2022' },
  });
  return outDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildPage(process.argv[2] ?? 'chat-page');
