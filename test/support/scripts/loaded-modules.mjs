// A model that answers with the library's modules its agent's thread has compiled so far,
// as JSON (paths under dist/, and `pkg:<name>` for each package loaded; sorted). Read from the thread's own inspector session: the
// debugger, once enabled, reports every script the isolate holds.
import { Session } from 'node:inspector/promises';
import { scriptedProvider } from '../../../dist/testing/index.js';

async function loadedModules() {
  const session = new Session();
  session.connect();
  const urls = new Set();
  session.on('Debugger.scriptParsed', ({ params }) => urls.add(params.url));
  await session.post('Debugger.enable');
  await session.post('Debugger.disable');
  session.disconnect();
  // The library's own modules by their path under dist/, and each package by `pkg:<name>`.
  const names = [...urls].map((url) => {
    const pkg = /node_modules\/((@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
    return pkg === undefined ? /\/dist\/(.+\.js)$/.exec(url)?.[1] : `pkg:${pkg}`;
  });
  return [...new Set(names.filter(Boolean))].sort();
}

export default function loadedModulesModel() {
  return scriptedProvider(async () => ({ text: JSON.stringify(await loadedModules()) }));
}
