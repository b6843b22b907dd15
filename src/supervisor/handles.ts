/**
 * What the supervisor hands back, as types: its lifecycle's states, a tree's handle and
 * result, and what a retried gate found. Kept apart from ./supervisor.ts so the modules
 * that only speak of them (a tree, runWith, the gate's retry) need not import the class.
 */
import type { GateVerdict, RunStatus } from '../runtime/events.js';
import type { RunPart } from './run-stream.js';

/** The supervisor's lifecycle, state by state. */
export type SupervisorState =
  /** starting the store actor */
  | 'starting'
  /** accepting runs */
  | 'running'
  /** close() was called; actors are being stopped */
  | 'draining'
  /** closed cleanly */
  | 'stopped'
  /** the store actor died; nothing more can be committed */
  | 'failed';

/** What {@link Supervisor.retryGate} found, and the run's status after it. */
export interface RetriedGate {
  verdict: GateVerdict;
  exitStatus: number | null;
  reasons: string[];
  status: RunStatus;
}

/** What a finished tree hands back. */
export interface TreeResult<Output = unknown> {
  rootId: string;
  status: RunStatus;
  reason: string | null;
  reply: string | null;
  /**
   * The root's answer as data, when its contract declared an OutputSchema and it finished:
   * the reply parsed and checked, typed by a zod schema's type. `null` otherwise.
   */
  output: Output | null;
  /** What the whole tree spent. */
  spent: { steps: number; tokens: number };
  /** How many runs the tree holds, root included. */
  runs: number;
}

/**
 * A tree under way: await `result`, or iterate the handle for what its agents do as they
 * do it — text deltas, tool calls starting and ending, steps committed, runs ended — and
 * the outcome last (see ./run-stream.ts). Begin iterating before awaiting anything else to
 * hear every part; each iteration is its own, and stopping one stops nothing but it.
 */
export interface RunHandle<Output = unknown> extends AsyncIterable<RunPart<Output>> {
  readonly rootId: string;
  /** Settles when the root and every run it started are terminal. */
  readonly result: Promise<TreeResult<Output>>;
  /** The root agent's text alone, as the model streams it; ends when the tree settles. */
  readonly textStream: AsyncIterable<string>;
  /** Stops every agent of the tree at its next step boundary and cancels what is queued. */
  cancel(): Promise<void>;
  /**
   * The root's work as the AI SDK's UI message stream, in a web `Response`: what `useChat`
   * reads (text as it streams, tool calls with input and output, errors, the finish with the
   * run's status and usage). See docs/guides/ai-sdk.md.
   */
  toUIMessageStreamResponse(init?: ResponseInit): Response;
  /** The same stream, written to a Node `ServerResponse`; resolves once it has ended. */
  pipeUIMessageStreamToResponse(
    response: import('node:http').ServerResponse,
    init?: { status?: number; headers?: Record<string, string> },
  ): Promise<void>;
}
