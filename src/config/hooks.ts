/**
 * Hooks: what `[[hook]]` tables of the user file (and of the bundles it declares) ask to
 * be done with committed events, as one observer the embedder installs like any other
 * (`supervisor.observe(config.hooks())`); the run loop knows nothing of them.
 *
 * - `append = "path"` is an audit log: each chosen event, one JSON line, in commit order,
 *   each once. Installed with `supervisor.observe`, the log first catches up from the
 *   store on everything committed after its own last line (events a crash kept from it), so
 *   across a crash and a resume it still holds every chosen event once, in order.
 * - `run = [argv]` runs a program for each chosen event (a notification, a formatter),
 *   through the executor: its own process group, a time limit, bounded output, and the
 *   allow-listed environment without the scrubbed variables. The event is in
 *   `IO_HARNESS_EVENT` (JSON); one hook's commands run one after another, in order.
 * - with `on_failure = "cancel"` a program that fails (exits non-zero, cannot start, runs
 *   out of time) ends the event's tree, every run recording the hook as the reason.
 */
import { appendFileSync, closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, truncateSync } from 'node:fs';
import { dirname } from 'node:path';
import type { HarnessEvent } from '../runtime/events.js';
import { directExecutor, type Executor } from '../runtime/exec/executor.js';
import { commandEnvironment, describeCommand } from '../runtime/exec/run-command.js';
import type { Observer, ObserverContext } from '../supervisor/event-bus.js';

/** One hook, as the configuration projects it. */
export interface HookSpec {
  /** Its name, as a failure and a cancelled run's reason name it (a bundle's: `<plugin>__<name>`). */
  name: string;
  /** The event types it wants; `*` for every one. */
  events: string[];
  /** An audit log's absolute path. */
  append?: string;
  /** A program to run for each event. */
  run?: string[];
  /** What a failed `run` does: nothing but a note (`ignore`), or end the tree (`cancel`). */
  onFailure: 'ignore' | 'cancel';
  timeoutMs: number;
  /** The file (and line) that declared it. */
  from: string;
}

/** A hook that failed: its name, the event, and what happened. */
export interface HookFailure {
  hook: string;
  eventId: number;
  rootId: string;
  message: string;
}

/** The observer `config.hooks()` returns. */
export type HookObserver = Observer & {
  /** Settles once every command started so far has ended (and every cancel it asked for was sent). */
  idle(): Promise<void>;
  /** Hooks that failed, newest last (at most 100 kept). */
  readonly failures: readonly HookFailure[];
};

/** Commands a `run` hook may have waiting before events are dropped (and the drop noted). */
const MAX_PENDING = 1000;
/** The most of the event handed to a command in `IO_HARNESS_EVENT`. */
const MAX_EVENT_CHARS = 64 * 1024;
/** How much of the file's end is read for its last event. */
const TAIL_BYTES = 64 * 1024;

/** The observer that carries out `hooks` (see the module's comment). */
export function hookObserver(
  hooks: readonly HookSpec[],
  options: { cwd: string; scrubbed?: readonly string[]; executor?: Executor },
): HookObserver {
  const executor = options.executor ?? directExecutor;
  const failures: HookFailure[] = [];
  const fail = (failure: HookFailure) => {
    failures.push(failure);
    if (failures.length > 100) failures.shift();
  };
  let context: ObserverContext | null = null;
  const logs = hooks.filter((hook) => hook.append).map((hook) => new AuditLog(hook));
  const runners = hooks
    .filter((hook) => hook.run)
    .map((hook) => new Runner(hook, options.cwd, options.scrubbed ?? [], executor, fail, () => context));
  const observer = ((event: HarnessEvent) => {
    for (const log of logs)
      try {
        log.write(event);
      } catch (error) {
        fail({ hook: log.hook.name, eventId: event.eventId, rootId: event.rootId, message: String(error) });
      }
    for (const runner of runners) runner.offer(event);
  }) as HookObserver;
  observer.attach = (given: ObserverContext) => {
    context = given;
    for (const log of logs)
      try {
        log.catchUp(given.store);
      } catch (error) {
        fail({ hook: log.hook.name, eventId: 0, rootId: '', message: `catching up from the store: ${String(error)}` });
      }
  };
  observer.idle = async () => {
    await Promise.all(runners.map((runner) => runner.idle()));
  };
  Object.defineProperty(observer, 'failures', { get: () => failures });
  return observer;
}

const wants = (hook: HookSpec, event: HarnessEvent) => hook.events.includes('*') || hook.events.includes(event.type);

/** An audit log: one JSON line an event, in commit order, each event once (by its id). */
class AuditLog {
  readonly hook: HookSpec;
  #last: number | null = null;

  constructor(hook: HookSpec) {
    this.hook = hook;
  }

  /** The id of the last event the file holds; a line cut short by a crash is cut off first. */
  #lastId(): number {
    if (this.#last !== null) return this.#last;
    const path = this.hook.append as string;
    mkdirSync(dirname(path), { recursive: true });
    this.#last = 0;
    if (!existsSync(path)) return 0;
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      const start = Math.max(0, size - TAIL_BYTES);
      const buffer = Buffer.alloc(size - start);
      readSync(fd, buffer, 0, buffer.length, start);
      // The last whole line ends at the last newline byte; what follows it was cut short by a crash.
      const end = buffer.lastIndexOf(0x0a);
      if (size > 0 && end !== buffer.length - 1) {
        if (end >= 0 || start === 0) truncateSync(path, start + end + 1);
        else appendFileSync(path, '\n');
      }
      const text = buffer.subarray(0, end + 1).toString('utf8');
      for (const line of text.split('\n').reverse()) {
        if (line.trim() === '') continue;
        try {
          const id = (JSON.parse(line) as { eventId?: unknown }).eventId;
          if (typeof id === 'number') {
            this.#last = id;
            break;
          }
        } catch {
          // A line not of ours (or cut short before it was ours): look further back.
        }
      }
    } finally {
      closeSync(fd);
    }
    return this.#last;
  }

  write(event: HarnessEvent): void {
    if (!wants(this.hook, event) || event.eventId <= this.#lastId()) return;
    appendFileSync(this.hook.append as string, `${JSON.stringify(event)}\n`);
    this.#last = event.eventId;
  }

  /** Appends what the store committed after the file's last event, in commit order. */
  catchUp(store: ObserverContext['store']): void {
    let after = this.#lastId();
    for (;;) {
      const batch = store.eventsAfter(after, 1000);
      if (batch.length === 0) return;
      for (const event of batch) this.write(event);
      after = (batch.at(-1) as HarnessEvent).eventId;
    }
  }
}

/** A `run` hook: its commands one after another, in the order the events came. */
class Runner {
  readonly #hook: HookSpec;
  readonly #cwd: string;
  readonly #scrubbed: readonly string[];
  readonly #executor: Executor;
  readonly #fail: (failure: HookFailure) => void;
  readonly #context: () => ObserverContext | null;
  #chain: Promise<void> = Promise.resolve();
  #pending = 0;

  constructor(
    hook: HookSpec,
    cwd: string,
    scrubbed: readonly string[],
    executor: Executor,
    fail: (failure: HookFailure) => void,
    context: () => ObserverContext | null,
  ) {
    this.#hook = hook;
    this.#cwd = cwd;
    this.#scrubbed = scrubbed;
    this.#executor = executor;
    this.#fail = fail;
    this.#context = context;
  }

  offer(event: HarnessEvent): void {
    if (!wants(this.#hook, event)) return;
    if (this.#pending >= MAX_PENDING) {
      this.#fail({
        hook: this.#hook.name,
        eventId: event.eventId,
        rootId: event.rootId,
        message: `dropped: ${MAX_PENDING} commands were already waiting; choose fewer events for this hook`,
      });
      return;
    }
    this.#pending++;
    this.#chain = this.#chain.then(() => this.#run(event)).finally(() => this.#pending--);
  }

  idle(): Promise<void> {
    return this.#chain;
  }

  async #run(event: HarnessEvent): Promise<void> {
    const argv = this.#hook.run as string[];
    let payload = JSON.stringify(event);
    if (payload.length > MAX_EVENT_CHARS)
      payload = JSON.stringify({
        eventId: event.eventId,
        rootId: event.rootId,
        runId: event.runId,
        type: event.type,
        at: event.at,
        truncated: true,
      });
    const env = {
      ...commandEnvironment(process.env, this.#scrubbed),
      IO_HARNESS_HOOK: this.#hook.name,
      IO_HARNESS_EVENT: payload,
      IO_HARNESS_EVENT_TYPE: event.type,
      IO_HARNESS_ROOT_ID: event.rootId,
      IO_HARNESS_RUN_ID: event.runId,
    };
    const result = await this.#executor.run({
      argv,
      purpose: 'hook',
      cwd: this.#cwd,
      timeoutMs: this.#hook.timeoutMs,
      outputLimit: 16 * 1024,
      env,
    });
    if (result.started && result.exitStatus === 0 && !result.timedOut) return;
    const what = describeCommand(argv, result).split('\n')[0] as string;
    const stderr = result.stderr.trim().split('\n')[0]?.slice(0, 200);
    const message = `${what}${stderr ? `: ${stderr}` : ''}`;
    this.#fail({ hook: this.#hook.name, eventId: event.eventId, rootId: event.rootId, message });
    if (this.#hook.onFailure !== 'cancel') return;
    const context = this.#context();
    if (!context) {
      this.#fail({
        hook: this.#hook.name,
        eventId: event.eventId,
        rootId: event.rootId,
        message: 'could not end the run: install the hooks with supervisor.observe(config.hooks())',
      });
      return;
    }
    await context
      .cancel(event.rootId, `cancelled by the hook ${JSON.stringify(this.#hook.name)} (${this.#hook.from}): ${message}`)
      .catch((error: unknown) =>
        this.#fail({ hook: this.#hook.name, eventId: event.eventId, rootId: event.rootId, message: String(error) }),
      );
  }
}
