/**
 * One language server of a run, spoken to over its stdio with the JSON-RPC connection of
 * the LSP ecosystem (`vscode-jsonrpc`). Started once, at the first question, through the run's
 * executor (its argv wrapped for the run's containment, as an MCP server's is); told of a
 * file (`didOpen`, then `didChange` with its whole text when it has changed on disk) before
 * any question about it; each question held to a deadline, and a server that exits, fails
 * to start or stops answering is an error that says so rather than a step that waits.
 * Ended with the run: `shutdown`, `exit`, then everything its sandbox started.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import type { MessageConnection } from 'vscode-jsonrpc';
import { endCommand } from '../exec/ending.js';
import { requiredOnFirstUse } from '../lazy-require.js';
import { DEFAULT_LSP_TIMEOUT_SECS, type LspServerData, languageIdOf } from './servers.js';

/** What starts the server: its argv and environment as the run's containment wraps them. */
export type LspLaunch = (argv: readonly string[]) => { argv: string[]; env: NodeJS.ProcessEnv };

/** Why a question got no answer: the server is not there, or did not answer in time. */
export class LspUnavailable extends Error {}

/** How long `shutdown` is given when the run ends, before the server is ended regardless. */
const SHUTDOWN_MS = 1_000;

/** The JSON-RPC client, loaded by the first server a run starts. */
const loadJsonRpc = requiredOnFirstUse<typeof import('vscode-jsonrpc/node')>('vscode-jsonrpc/node');

export class LspClient {
  readonly server: LspServerData;
  /** Whether its start has been decided (as a command) and recorded in a call's step: once a run. */
  authorized = false;
  readonly #root: string;
  readonly #launch: LspLaunch;
  #child: ChildProcess | null = null;
  #connection: MessageConnection | null = null;
  #ready: Promise<void> | null = null;
  /** Why the server cannot answer (it failed to start, or exited), once it cannot. */
  #gone: string | null = null;
  /** The waits to end at once when the server goes (see {@link #timed}). */
  readonly #onGone = new Set<(reason: string) => void>();
  #closing: Promise<void> | null = null;
  /** The text each file was last sent with, its version, and where it is. */
  readonly #opened = new Map<string, { text: string; version: number; absolute: string }>();

  constructor(server: LspServerData, root: string, launch: LspLaunch) {
    this.server = server;
    this.#root = root;
    this.#launch = launch;
  }

  /** The program, as the model and the trace are told of it. */
  get name(): string {
    return this.server.command.join(' ');
  }

  get #deadlineMs(): number {
    return (this.server.timeoutSecs ?? DEFAULT_LSP_TIMEOUT_SECS) * 1000;
  }

  /** Starts the server (once) and initialises it; resolves when it is ready, rejects with why it is not. */
  start(): Promise<void> {
    this.#ready ??= this.#closing
      ? Promise.reject(new LspUnavailable(`the language server ${this.name} was stopped with the run`))
      : this.#start();
    // A start that fails is reported to the question that waits on it, not thrown at the run.
    this.#ready.catch(() => undefined);
    return this.#ready;
  }

  async #start(): Promise<void> {
    const rpc = loadJsonRpc();
    const { argv, env } = this.#launch(this.server.command);
    const [program, ...args] = argv as [string, ...string[]];
    const child = spawn(program, args, { cwd: this.#root, env, stdio: ['pipe', 'pipe', 'ignore'], detached: true });
    this.#child = child;
    const started = new Promise<void>((resolve, reject) => {
      child.once('spawn', () => resolve());
      child.once('error', (error) => reject(new LspUnavailable(`${this.name} could not be started: ${error.message}`)));
    });
    child.once('exit', (code, signal) => {
      this.#goes(`the language server ${this.name} exited (${signal ?? `status ${code}`})`);
    });
    // A closed pipe is the exit's to report.
    child.stdin?.on('error', () => undefined);
    await started;
    // Stopped with the run while it was starting: close() has ended the process.
    if (this.#closing) throw new LspUnavailable(`the language server ${this.name} was stopped with the run`);
    const connection = rpc.createMessageConnection(
      new rpc.StreamMessageReader(child.stdout as NodeJS.ReadableStream),
      new rpc.StreamMessageWriter(child.stdin as NodeJS.WritableStream),
    );
    this.#connection = connection;
    // What the server asks of its client: nothing here is configured, registered or shown.
    connection.onRequest((method) => (method === 'workspace/configuration' ? [] : null));
    connection.onNotification(() => undefined);
    connection.onError(() => undefined);
    connection.onClose(() => {
      this.#goes(`the language server ${this.name} closed its connection`);
    });
    connection.listen();
    const rootUri = pathToFileURL(this.#root).href;
    await this.#timed(
      connection.sendRequest('initialize', {
        // Not this process's pid: a contained server has a PID namespace of its own, where
        // that pid is no process, or another one; a server that watches it would exit.
        // It is ended with the run instead.
        processId: null,
        rootUri,
        workspaceFolders: [{ uri: rootUri, name: 'workspace' }],
        capabilities: {
          textDocument: {
            synchronization: { didSave: false },
            definition: { linkSupport: false },
            references: {},
            documentSymbol: { hierarchicalDocumentSymbolSupport: true },
            hover: { contentFormat: ['plaintext', 'markdown'] },
            rename: { prepareSupport: false },
          },
          workspace: { workspaceEdit: { documentChanges: true }, configuration: true },
        },
        ...(this.server.initializationOptions !== undefined
          ? { initializationOptions: this.server.initializationOptions }
          : {}),
      }),
      'to start',
    );
    await connection.sendNotification('initialized', {});
  }

  /** Records why the server cannot answer any more (the first reason stays) and ends every wait on it. */
  #goes(reason: string): void {
    if (this.#gone !== null) return;
    this.#gone = reason;
    for (const end of this.#onGone) end(reason);
    this.#onGone.clear();
  }

  /** `promise`, or an LspUnavailable once the deadline passes or the server goes. */
  async #timed<T>(promise: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let ended: ((reason: string) => void) | undefined;
    const seconds = this.server.timeoutSecs ?? DEFAULT_LSP_TIMEOUT_SECS;
    try {
      return await Promise.race([
        promise,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new LspUnavailable(
                  `the language server ${this.name} did not answer ${what} within ${seconds} s; try again, or use grep and read_file`,
                ),
              ),
            this.#deadlineMs,
          );
          // A server that exits meanwhile ends the wait at once.
          ended = (reason) => reject(new LspUnavailable(reason));
          if (this.#gone) ended(this.#gone);
          else this.#onGone.add(ended);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (ended) this.#onGone.delete(ended);
    }
  }

  /**
   * Asks `method` about the file at `absolute` (whose text is `text`, read by the caller
   * after its read check): the server is told of the file's current text first.
   */
  async ask<T>(method: string, absolute: string, text: string, params: Record<string, unknown>): Promise<T> {
    if (this.#gone) throw new LspUnavailable(this.#gone);
    await this.#timed(this.start(), 'to start');
    const connection = this.#connection as MessageConnection;
    const uri = pathToFileURL(absolute).href;
    // A server that stops reading its input holds a write as long as an answer.
    await this.#timed(this.#send(connection, uri, absolute, text), 'as it was sent the file');
    return this.#timed(
      connection.sendRequest<T>(method, { textDocument: { uri }, ...params }),
      `${method.replace('textDocument/', '')}`,
    );
  }

  /** Tells the server of `absolute`'s text: opened the first time, changed when it differs from what it was sent. */
  async #send(connection: MessageConnection, uri: string, absolute: string, text: string): Promise<void> {
    const known = this.#opened.get(uri);
    if (!known) {
      this.#opened.set(uri, { text, version: 1, absolute });
      await connection.sendNotification('textDocument/didOpen', {
        textDocument: { uri, languageId: languageIdOf(absolute), version: 1, text },
      });
    } else if (known.text !== text) {
      const version = known.version + 1;
      this.#opened.set(uri, { text, version, absolute });
      await connection.sendNotification('textDocument/didChange', {
        textDocument: { uri, version },
        contentChanges: [{ text }],
      });
    }
  }

  /**
   * Tells the server of every file it was sent whose text has changed since (`read` gives
   * the text now, null when it cannot be read any more: then it is closed), so an answer
   * that spans files (a rename) is computed on the texts the harness will patch.
   */
  async refresh(read: (absolute: string) => string | null): Promise<void> {
    const connection = this.#connection;
    if (!connection || this.#gone) return;
    for (const [uri, known] of [...this.#opened]) {
      const text = read(known.absolute);
      if (text === null) {
        this.#opened.delete(uri);
        await this.#timed(
          connection.sendNotification('textDocument/didClose', { textDocument: { uri } }),
          'as files were closed',
        );
      } else await this.#timed(this.#send(connection, uri, known.absolute, text), 'as it was sent the file');
    }
  }

  /** Ends the server and everything its sandbox started; returns once they are gone (bounded). */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const connection = this.#connection;
      if (connection && !this.#gone) {
        try {
          await Promise.race([
            connection.sendRequest('shutdown').then(() => connection.sendNotification('exit')),
            new Promise((resolve) => setTimeout(resolve, SHUTDOWN_MS)),
          ]);
        } catch {
          // Gone already: ended below regardless.
        }
      }
      this.#goes(`the language server ${this.name} was stopped with the run`);
      connection?.dispose();
      if (this.#child) await endCommand(this.#child);
    })();
    return this.#closing;
  }
}
