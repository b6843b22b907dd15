/**
 * The language servers a workspace run may ask (`TaskContract.withLsp`): each a program the
 * operator names, the file extensions it answers for, and what it is handed when it starts.
 * Checked here once, so a contract, its JSON form and a resumed run's stored spec are held
 * to the same rules; the client (./client.ts) and the tools (../tools/families/lsp.ts)
 * take them as checked.
 */
import { extname } from 'node:path';
import { InvalidArgumentError } from '../../errors.js';

/** One language server, as a contract stores it. */
export interface LspServerData {
  /** The program and its arguments, e.g. `['typescript-language-server', '--stdio']`: found on the run's PATH as a command is. */
  command: string[];
  /** The extensions of the files it answers for, each with its dot (`.ts`); an extension names one server only. */
  extensions: string[];
  /** Handed to the server as `initializationOptions` when it starts (JSON). */
  initializationOptions?: unknown;
  /** How long a question may take before the call is an error, in seconds (default 30; the first question also waits for the server to start). */
  timeoutSecs?: number;
}

/** What `withLsp` takes for one server: the program, its arguments apart or in `command`. */
export interface LspServerOptions {
  command: string | string[];
  args?: string[];
  extensions: string[];
  initializationOptions?: unknown;
  timeoutSecs?: number;
}

/** The most servers one run names. */
export const MAX_LSP_SERVERS = 8;
/** A question's deadline when the contract names none, in seconds. */
export const DEFAULT_LSP_TIMEOUT_SECS = 30;

const EXTENSION = /^\.[A-Za-z0-9_+-]{1,16}$/;

/** `servers` checked and normalised, or an InvalidArgumentError that says which and what to write instead. */
export function checkLspServers(servers: readonly unknown[]): LspServerData[] {
  if (servers.length === 0)
    throw new InvalidArgumentError(
      'withLsp() needs at least one server, e.g. { command: "typescript-language-server", args: ["--stdio"], extensions: [".ts"] }.',
    );
  if (servers.length > MAX_LSP_SERVERS)
    throw new InvalidArgumentError(`withLsp() takes at most ${MAX_LSP_SERVERS} servers; ${servers.length} were given.`);
  const claimed = new Map<string, number>();
  return servers.map((server, index) => {
    const where = `withLsp() server ${index + 1}`;
    if (typeof server !== 'object' || server === null || Array.isArray(server))
      throw new InvalidArgumentError(`${where} must be an object with command and extensions.`);
    const { command, args, extensions, initializationOptions, timeoutSecs, ...rest } = server as Record<
      string,
      unknown
    >;
    const unknown = Object.keys(rest);
    if (unknown.length > 0)
      throw new InvalidArgumentError(
        `${where} has no option ${JSON.stringify(unknown[0])}; the options are command, args, extensions, initializationOptions and timeoutSecs.`,
      );
    const argv = [...(Array.isArray(command) ? command : [command]), ...(Array.isArray(args) ? args : [])];
    if (args !== undefined && !Array.isArray(args))
      throw new InvalidArgumentError(`${where}: args must be a list of strings.`);
    if (argv.length === 0 || !argv.every((part) => typeof part === 'string' && part !== '' && !part.includes('\0')))
      throw new InvalidArgumentError(
        `${where}: command must name a program (a non-empty string, or a list of them with its arguments), e.g. "typescript-language-server".`,
      );
    if (!Array.isArray(extensions) || extensions.length === 0)
      throw new InvalidArgumentError(`${where}: extensions must list the files it answers for, e.g. [".ts", ".tsx"].`);
    for (const extension of extensions) {
      if (typeof extension !== 'string' || !EXTENSION.test(extension))
        throw new InvalidArgumentError(
          `${where}: ${JSON.stringify(extension)} is not an extension; write each with its dot, like ".ts".`,
        );
      const other = claimed.get(extension.toLowerCase());
      if (other !== undefined)
        throw new InvalidArgumentError(
          `${where}: ${extension} is already answered by server ${other + 1}; an extension names one server.`,
        );
      claimed.set(extension.toLowerCase(), index);
    }
    if (timeoutSecs !== undefined && (typeof timeoutSecs !== 'number' || !(timeoutSecs > 0) || timeoutSecs > 3600))
      throw new InvalidArgumentError(`${where}: timeoutSecs must be a number of seconds above 0 and at most 3600.`);
    let options: unknown;
    if (initializationOptions !== undefined) {
      try {
        options = JSON.parse(JSON.stringify(initializationOptions));
      } catch {
        throw new InvalidArgumentError(`${where}: initializationOptions must be plain JSON.`);
      }
    }
    return {
      command: argv as string[],
      extensions: (extensions as string[]).map((extension) => extension.toLowerCase()),
      ...(options !== undefined ? { initializationOptions: options } : {}),
      ...(timeoutSecs !== undefined ? { timeoutSecs: timeoutSecs as number } : {}),
    };
  });
}

/** The index of the server that answers for `path` (by its extension), or -1. */
export function serverIndexFor(servers: readonly LspServerData[], path: string): number {
  const extension = extname(path).toLowerCase();
  return extension === '' ? -1 : servers.findIndex((server) => server.extensions.includes(extension));
}

/** The LSP language id of a file, from its extension: the common ones by name, else the extension itself. */
export function languageIdOf(path: string): string {
  const extension = extname(path).toLowerCase().slice(1);
  return LANGUAGE_IDS[extension] ?? extension;
}

const LANGUAGE_IDS: Record<string, string> = {
  ts: 'typescript',
  mts: 'typescript',
  cts: 'typescript',
  tsx: 'typescriptreact',
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascriptreact',
  py: 'python',
  rs: 'rust',
  go: 'go',
  c: 'c',
  h: 'c',
  cc: 'cpp',
  cpp: 'cpp',
  hpp: 'cpp',
  java: 'java',
  rb: 'ruby',
  cs: 'csharp',
};
