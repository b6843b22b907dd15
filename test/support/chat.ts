/** The examples/chat server as the tests start it: a real child process on a store file, its model the scripted server. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../examples/chat/server.mjs', import.meta.url));
const BUILD = fileURLToPath(new URL('../../examples/chat/build.mjs', import.meta.url));

/** The chat page, built as a user builds it, in a process of its own (not inside the test runner's own vite), into `dir`/page. */
export function buildChatPage(dir: string): string {
  const page = join(dir, 'page');
  execFileSync(process.execPath, [BUILD, page], { stdio: 'ignore' });
  return page;
}

/**
 * The example's server on `port` over the store file `store`, serving `page`, its model at
 * `modelUrl` on OpenAI's wire; what it writes to stderr goes to `said`. Resolves once it listens.
 */
export function startChatServer(options: {
  store: string;
  port: number;
  page: string;
  modelUrl: string;
  said: string[];
  /** Where the process is listed as it is spawned (to be ended after, started or not). */
  track?: ChildProcess[];
}): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [SERVER, '--store', options.store, '--port', String(options.port), '--page', options.page],
    {
      env: {
        ...process.env,
        OPENAI_API_KEY: 'scripted',
        OPENAI_MODEL: 'scripted',
        OPENAI_BASE_URL: `${options.modelUrl}/v1`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  options.track?.push(child);
  child.stderr?.on('data', (chunk) => options.said.push(String(chunk)));
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      if (String(chunk).includes('chat on')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the chat server exited (${code}): ${options.said.join('')}`)));
  });
}
