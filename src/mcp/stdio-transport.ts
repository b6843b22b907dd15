/**
 * The MCP client's transport to a stdio server: the SDK's framing (one JSON-RPC message a
 * line), with the harness's own end. The SDK's stdio transport, closing, signals the
 * process it spawned (SIGTERM, then SIGKILL) and returns once that process is reported
 * closed, or at once after its SIGKILL: for a contained server that process is the
 * sandbox's launcher, which dies at once while the kernel is still tearing down the
 * processes inside, so its close could return with the server still running. This one
 * returns once every process the server's sandbox started is gone (see endCommand),
 * within bounds; what outlives them is kept in `survivors`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { END_BOUNDS, type EndBounds, endCommand } from '../runtime/exec/ending.js';

export interface StdioServerLaunch {
  command: string;
  args: string[];
  /** Laid over the SDK's default environment (PATH, HOME and the like), as the SDK's transport does. */
  env?: Record<string, string> | undefined;
  cwd: string;
}

export class ContainedStdioTransport implements Transport {
  readonly #launch: StdioServerLaunch;
  readonly #bounds: EndBounds;
  readonly #buffer = new ReadBuffer();
  #process: ChildProcess | null = null;
  #ending: Promise<void> | null = null;
  /** Host pids still running once close() gave up on them (empty when everything ended). */
  survivors: number[] = [];

  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  constructor(launch: StdioServerLaunch, bounds: EndBounds = END_BOUNDS) {
    this.#launch = launch;
    this.#bounds = bounds;
  }

  start(): Promise<void> {
    if (this.#process) throw new Error('the stdio transport was started already');
    return new Promise((resolve, reject) => {
      const launch = this.#launch;
      // Its own process group: what an uncontained server starts is ended with it.
      const child = spawn(launch.command, launch.args, {
        env: { ...getDefaultEnvironment(), ...(launch.env ?? {}) },
        cwd: launch.cwd,
        stdio: ['pipe', 'pipe', 'ignore'],
        detached: true,
      });
      this.#process = child;
      child.on('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        if (this.#process === child) this.#process = null;
        this.onclose?.();
      });
      child.stdin?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => {
        try {
          this.#buffer.append(chunk);
          this.#read();
        } catch (error) {
          this.onerror?.(error as Error);
          void this.close();
        }
      });
    });
  }

  #read(): void {
    for (;;) {
      try {
        const message = this.#buffer.readMessage();
        if (message === null) return;
        this.onmessage?.(message);
      } catch (error) {
        this.onerror?.(error as Error);
      }
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      const stdin = this.#process?.stdin;
      if (!stdin) throw new Error('Not connected');
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Ends the server: resolves once every process its sandbox started is gone, or the bounds have passed. */
  close(): Promise<void> {
    const child = this.#process;
    this.#process = null;
    this.#ending ??= (async () => {
      if (child) this.survivors = await endCommand(child, this.#bounds);
      this.#buffer.clear();
    })();
    return this.#ending;
  }
}
