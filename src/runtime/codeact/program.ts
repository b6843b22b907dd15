/**
 * One program, run: its interpreter spawned (already wrapped for the run's containment),
 * the prelude handed the source and the tools it may call, and each call it makes answered
 * in turn, one JSON line each way (see ./preludes.ts). Beyond the sandbox's bounds, the
 * harness holds a program to a count of acts and of output bytes and to its step's signal
 * (a cancel, the step's wall clock): past any of them it is ended, and everything it
 * started with it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { endCommand } from '../exec/ending.js';
import { MAX_CALL_ARGUMENTS_BYTES } from '../tools/registry.js';
import type { ToolResult } from '../tools/tool.js';

/** What a program is run with. */
export interface ProgramRequest {
  /** The interpreter and the prelude, wrapped for the run's containment. */
  argv: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  source: string;
  /** The tools the program may call, each with its parameters in the order positional arguments fill them. */
  tools: Record<string, string[]>;
  maxActs: number;
  maxOutputBytes: number;
  /** The longest the program may run, in milliseconds (its timeout, or the sandbox's wallSecs where that is sooner). */
  wallMs: number;
  signal: AbortSignal;
  /** Runs act `index` (from 0): the tool's answer, or a halt that ends the program. */
  act(index: number, name: string, args: Record<string, unknown>): Promise<ToolResult>;
}

/** How a program ended. */
export interface ProgramOutcome {
  started: boolean;
  /** Why it could not start, when it did not. */
  error: string | null;
  exitStatus: number | null;
  signal: string | null;
  output: string;
  /** Bytes printed beyond what was kept. */
  dropped: number;
  /** The acts it asked for, by tool, in the order first asked. */
  acts: Map<string, number>;
  /** How many of them were refused. */
  refused: number;
  /** Why the harness ended it (a bound it passed, a cancel), when it did. */
  ended: string | null;
  /** An act that halted the step (a pause for a person, a stop): the program was ended for it. */
  halt: ToolResult | null;
}

/** The longest line a program may write to the harness: one call's arguments and its envelope. */
const MAX_REQUEST_BYTES = MAX_CALL_ARGUMENTS_BYTES + 64 * 1024;

/**
 * The rule of an act of a program that is not the one the program asked for at that place
 * before a crash: the program took another path on its second run, and is ended there, so
 * that an act displaced to a later place is not made a second time.
 */
export const DIVERGED = 'codeact.diverged';

/** Runs the program to its end (see the module's comment); throws only what an act threw, once the program is ended. */
export async function runProgram(request: ProgramRequest): Promise<ProgramOutcome> {
  const outcome: ProgramOutcome = {
    started: false,
    error: null,
    exitStatus: null,
    signal: null,
    output: '',
    dropped: 0,
    acts: new Map(),
    refused: 0,
    ended: null,
    halt: null,
  };
  const [program, ...args] = request.argv as [string, ...string[]];
  let child: ChildProcess;
  try {
    child = spawn(program, args, {
      cwd: request.cwd,
      env: request.env,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
  } catch (error) {
    outcome.error = (error as Error).message;
    return outcome;
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const spawned = await new Promise<boolean>((resolve) => {
    child.once('spawn', () => resolve(true));
    child.once('error', (error) => {
      outcome.error = error.message;
      resolve(false);
    });
  });
  if (!spawned) return outcome;
  outcome.started = true;
  const requests = child.stdio[3] as Readable;
  const replies = child.stdio[4] as Writable;
  // A program gone before its answer is read: the write fails, which its end reports.
  replies.on('error', () => undefined);
  let ending: Promise<unknown> | null = null;
  // Its pipes closed here once it has gone: a process it started outside its namespace (an
  // unconfined program's) that holds them open keeps nothing waiting.
  let torn = false;
  const tear = () => {
    torn = true;
    for (const stream of child.stdio) stream?.destroy();
  };
  const end = (why: string) => {
    outcome.ended ??= why;
    ending ??= endCommand(child, { graceMs: 0, killMs: 5_000 }).finally(tear);
  };
  // What it printed last is read, unless a process it left holds its pipes open past a second.
  void exited.then(() => setTimeout(tear, 1_000).unref());
  const kept: Buffer[] = [];
  let keptBytes = 0;
  const take = (chunk: Buffer) => {
    const room = request.maxOutputBytes - keptBytes;
    if (chunk.length > room) {
      if (room > 0) kept.push(chunk.subarray(0, room));
      keptBytes += Math.max(room, 0);
      outcome.dropped += chunk.length - Math.max(room, 0);
      end(`it printed more than ${request.maxOutputBytes} bytes, the most a program may print (maxOutputBytes)`);
      return;
    }
    kept.push(chunk);
    keptBytes += chunk.length;
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  const onAbort = () => end('its step was stopped (a cancel, or the step ran out of time)');
  if (request.signal.aborted) onAbort();
  request.signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(
    () => end(`it ran for ${request.wallMs / 1000} s, the most a program may (timeoutSecs, or the sandbox's wallSecs)`),
    request.wallMs,
  );
  replies.write(`${JSON.stringify({ source: request.source, tools: request.tools })}\n`);
  let failure: unknown = null;
  try {
    await serve(requests, replies, request, outcome, end);
  } catch (error) {
    // Its channel torn down as it ended, or an act the harness could not make (a store
    // that failed, a lease lost): the program is ended either way, and the second is thrown on.
    if (outcome.ended === null && !torn) {
      failure = error;
      end(`the harness could not make an act it asked for: ${(error as Error).message}`);
    }
  }
  try {
    await exited;
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    tear();
    if (ending) await ending;
  } finally {
    clearTimeout(timer);
    request.signal.removeEventListener('abort', onAbort);
  }
  if (failure !== null) throw failure;
  outcome.exitStatus = child.exitCode;
  outcome.signal = child.signalCode;
  outcome.output = Buffer.concat(kept).toString('utf8');
  return outcome;
}

/** Answers the program's calls, one at a time, until its channel closes or it is ended. */
async function serve(
  requests: Readable,
  replies: Writable,
  request: ProgramRequest,
  outcome: ProgramOutcome,
  end: (why: string) => void,
): Promise<void> {
  let pending: Buffer = Buffer.alloc(0);
  let count = 0;
  for await (const chunk of requests as AsyncIterable<Buffer>) {
    if (outcome.ended !== null) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (let at = pending.indexOf(10); at >= 0; at = pending.indexOf(10)) {
      const line = pending.subarray(0, at).toString('utf8');
      pending = pending.subarray(at + 1);
      const call = parse(line);
      if (typeof call === 'string') {
        replies.write(`${JSON.stringify({ stop: `io-harness: ${call}` })}\n`);
        end(call);
        return;
      }
      if (count >= request.maxActs) {
        const why = `it asked for more than ${request.maxActs} acts, the most one program may make (maxActs); the acts before it were made`;
        replies.write(`${JSON.stringify({ stop: `io-harness: the program was ended: ${why}.` })}\n`);
        end(why);
        return;
      }
      // What it printed before asking is read first: past its cap, the act is not made.
      await new Promise((resolve) => setImmediate(resolve));
      if (outcome.ended !== null) return;
      outcome.acts.set(call.tool, (outcome.acts.get(call.tool) ?? 0) + 1);
      const result = await request.act(count++, call.tool, call.args);
      if (result.halt) {
        outcome.halt = result;
        end('an act it asked for stopped the step');
        return;
      }
      if (result.refusal?.rule === DIVERGED) {
        replies.write(`${JSON.stringify({ stop: `io-harness: the program was ended: ${result.content}` })}\n`);
        outcome.refused++;
        end(result.content);
        return;
      }
      if (result.refusal) outcome.refused++;
      const reply = {
        content: result.content,
        isError: result.isError,
        ...(result.refusal ? { refused: { rule: result.refusal.rule, layer: result.refusal.layer ?? 'runtime' } } : {}),
      };
      replies.write(`${JSON.stringify(reply)}\n`);
    }
    if (pending.length > MAX_REQUEST_BYTES) {
      end(`it wrote a call of more than ${MAX_REQUEST_BYTES} bytes, larger than any tool takes`);
      return;
    }
  }
}

/** One call as the program wrote it, or what is wrong with it. */
function parse(line: string): { tool: string; args: Record<string, unknown> } | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return 'the program wrote something other than a call on its channel to the harness';
  }
  const call = value as { tool?: unknown; args?: unknown };
  if (
    typeof call !== 'object' ||
    call === null ||
    typeof call.tool !== 'string' ||
    typeof call.args !== 'object' ||
    call.args === null ||
    Array.isArray(call.args)
  )
    return 'a call on the channel to the harness names a tool and an object of its arguments';
  return { tool: call.tool, args: call.args as Record<string, unknown> };
}
