// comlink publishes its ES modules without an exports map; these name their types
// (the package's own) for the paths this project imports.
declare module 'comlink/dist/esm/comlink.mjs' {
  export * from 'comlink';
}

declare module 'comlink/dist/esm/node-adapter.mjs' {
  import type { MessagePort } from 'node:worker_threads';
  import type { Endpoint } from 'comlink';
  export default function nodeEndpoint(nep: MessagePort): Endpoint;
}
