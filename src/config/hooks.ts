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
import { dirname, isAbsolute, resolve } from 'node:path';
import type { HarnessEvent } from '../runtime/events.js';
import type { SandboxData } from '../runtime/exec/containment/boundary.js';
import type { ContainedExecutor, ContainedReport } from '../runtime/exec/containment/contained.js';
import { executorFor } from '../runtime/exec/factory.js';
import { type CommandResult, commandEnvironment, describeCommand, notStarted } from '../runtime/exec/run-command.js';
import type { Policy } from '../runtime/policy/policy.js';
import { matches, type Observer, type ObserverContext } from '../supervisor/event-bus.js';
import { filePath } from './substitute.js';

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
  /** For a `run` hook's program: the rung it ran on (`full-access` where the sandbox asked for none). */
  containment?: ContainedReport['rung'];
}

/** The observer `config.hooks()` returns. */
export type HookObserver = Observer & {
  /** Settles once every command started so far has ended (and every cancel it asked for was sent). */
  idle(): Promise<void>;
  /** Hooks that failed, newest last (at most 100 kept). */
  readonly failures: readonly HookFailure[];
  /** Waits for the commands under way, then ends what their containment holds (its own directories). */
  close(): Promise<void>;
  /**
   * What the `run` hooks' programs get (the rung, what it enforces), as a run's `contained`
   * event says it. Throws CONTAINMENT_UNAVAILABLE where the sandbox names a rung this host
   * cannot give (every program then fails, saying so).
   */
  contained(): ContainedReport;
};

/** Commands a `run` hook may have waiting before events are dropped (and the drop noted). */
const MAX_PENDING = 1000;
/** The most bytes of the event handed to a command in `IO_HARNESS_EVENT` (one variable may hold 128 KiB). */
const MAX_EVENT_BYTES = 64 * 1024;
/** How much of the file's end is read for its last event. */
const TAIL_BYTES = 64 * 1024;

/** The observer that carries out `hooks` (see the module's comment). */
export function hookObserver(
  hooks: readonly HookSpec[],
  options: {
    cwd: string;
    scrubbed?: readonly string[];
    /** What the programs are granted, as a run's commands are by its contract: with `cwd` as the workspace. */
    sandbox?: SandboxData;
    /** Decides the programs' connections through the egress proxy (none, without a `net` rule). */
    policy?: Policy;
  },
): HookObserver {
  // The executor factory's, made when first asked for, so an observer with no run hook starts no containment.
  let executor: ContainedExecutor | null = null;
  const contain = (): ContainedExecutor => {
    executor ??= executorFor({
      purpose: 'hook',
      root: options.cwd,
      ...(options.sandbox ? { sandbox: options.sandbox } : {}),
      policy: options.policy ?? null,
    });
    return executor;
  };
  const failures: HookFailure[] = [];
  const fail = (failure: HookFailure) => {
    failures.push(failure);
    if (failures.length > 100) failures.shift();
  };
  let context: ObserverContext | null = null;
  const logs = hooks.filter((hook) => hook.append).map((hook) => new AuditLog(hook));
  const runners = hooks
    .filter((hook) => hook.run)
    .map((hook) => new Runner(hook, options.cwd, options.scrubbed ?? [], contain, fail, () => context));
  const write = (log: AuditLog, event: HarnessEvent) => {
    try {
      log.write(event);
    } catch (error) {
      fail({ hook: log.hook.name, eventId: event.eventId, rootId: event.rootId, message: String(error) });
    }
  };
  const observer = ((event: HarnessEvent) => {
    // A log that follows the store is written by what it reads there, every host's commits in order.
    for (const log of logs) if (!log.following) write(log, event);
    for (const runner of runners) runner.offer(event);
  }) as HookObserver;
  observer.attach = (given: ObserverContext) => {
    context = given;
    for (const log of logs)
      try {
        // Several hosts commit to the store (PostgreSQL): the log follows all of them, from its last line.
        if (given.follow) log.follow(given.follow, given.filter ?? {}, (event) => write(log, event));
        else log.catchUp(given.store, given.filter ?? {});
      } catch (error) {
        fail({ hook: log.hook.name, eventId: 0, rootId: '', message: `catching up from the store: ${String(error)}` });
      }
  };
  observer.idle = async () => {
    await Promise.all(runners.map((runner) => runner.idle()));
  };
  observer.close = async () => {
    for (const log of logs) log.stopFollowing();
    await observer.idle();
    await executor?.close();
  };
  observer.contained = () => contain().contained();
  Object.defineProperty(observer, 'failures', { get: () => failures });
  return observer;
}

/**
 * A hook's argv with its program found from where it was declared: a relative path with a
 * slash in it (`scripts/notify.sh`) is from the declaring file's directory (or bundle's),
 * never the workspace a run works in; a bare name is looked up on PATH when it runs.
 */
export function programFrom(argv: readonly string[], base: string): string[] {
  const [program, ...rest] = argv as [string, ...string[]];
  return [program.includes('/') && !isAbsolute(program) ? resolve(base, program) : program, ...rest];
}

/** A `[[hook]]` table as a file declares it (a configuration's or a bundle's). */
export interface HookTable {
  name?: string | undefined;
  events: readonly string[];
  append?: string | undefined;
  run?: readonly string[] | undefined;
  on_failure?: 'ignore' | 'cancel' | undefined;
  timeout_secs?: number | undefined;
}

/**
 * One `[[hook]]` table as a spec, with paths found from `base` (the declaring file's or
 * bundle's directory; `~/` from home). Where the log may go is the caller's to decide.
 */
export function hookSpecFrom(item: HookTable, at: { name: string; base: string; from: string }): HookSpec {
  return {
    name: at.name,
    events: [...item.events],
    ...(item.append === undefined ? {} : { append: filePath(item.append, at.base) }),
    ...(item.run === undefined ? {} : { run: programFrom(item.run, at.base) }),
    onFailure: item.on_failure ?? 'ignore',
    timeoutMs: Math.round((item.timeout_secs ?? 30) * 1000),
    from: at.from,
  };
}

const wants = (hook: HookSpec, event: HarnessEvent) => hook.events.includes('*') || hook.events.includes(event.type);

/**
 * The last event id each audit log of this process holds, by path: two observers (or two
 * hooks) on one file share it, so neither writes an event the other has.
 */
const positions = new Map<string, { last: number }>();

/**
 * Where several hosts commit (PostgreSQL): one tail of the store per log file in this
 * process, from the file's last event, offering each event, in commit order, to every
 * log of that file (each with its own events and scope), so one file's logs never write
 * past each other. The tail stops when the file's last log stops following.
 */
const followers = new Map<string, { handle: { close(): void }; logs: Map<AuditLog, (event: HarnessEvent) => void> }>();

/** An audit log: one JSON line an event, in commit order, each event once (by its id). */
class AuditLog {
  readonly hook: HookSpec;
  /** Fed by the store (several hosts), not by this host's commits: from its first follow() on, for good. */
  #followed = false;

  constructor(hook: HookSpec) {
    this.hook = hook;
  }

  /** Whether the store's events feed the log (where several hosts commit), not this host's alone. */
  get following(): boolean {
    return this.#followed;
  }

  /**
   * Writes every event committed after the file's last, by any host, as the store has them
   * (see ObserverContext.follow): a crash, a takeover, another host's commits, none is missed.
   * `filter` is the observer's scope (a tree or a run); `write` writes one event.
   */
  follow(
    follow: NonNullable<ObserverContext['follow']>,
    filter: { rootId?: string; runId?: string },
    write: (event: HarnessEvent) => void,
  ): void {
    this.#followed = true;
    const path = this.hook.append as string;
    const offer = (event: HarnessEvent) => {
      if (matches(filter, event)) write(event);
    };
    let follower = followers.get(path);
    if (!follower) {
      const logs = new Map<AuditLog, (event: HarnessEvent) => void>();
      const handle = follow(this.#position().last, (event) => {
        for (const take of logs.values()) take(event);
      });
      follower = { handle, logs };
      followers.set(path, follower);
    }
    follower.logs.set(this, offer);
  }

  /** No longer written (its observer closed); the file's tail stops with its last log. */
  stopFollowing(): void {
    const path = this.hook.append as string;
    const follower = followers.get(path);
    if (!follower?.logs.delete(this) || follower.logs.size > 0) return;
    follower.handle.close();
    followers.delete(path);
  }

  /** Where the file stands: the id of the last event it holds, read once a process (a torn last line cut off first). */
  #position(): { last: number } {
    const path = this.hook.append as string;
    let position = positions.get(path);
    if (!position) {
      position = { last: lastEventId(path) };
      positions.set(path, position);
    }
    return position;
  }

  write(event: HarnessEvent): void {
    const position = this.#position();
    if (!wants(this.hook, event) || event.eventId <= position.last) return;
    appendFileSync(this.hook.append as string, `${JSON.stringify(event)}\n`);
    position.last = event.eventId;
  }

  /** Appends what the store committed after the file's last event (of the observed tree or run), in commit order. */
  catchUp(store: ObserverContext['store'], filter: { rootId?: string; runId?: string }): void {
    let after = this.#position().last;
    for (;;) {
      const batch = store.eventsAfter(after, 1000);
      if (batch.length === 0) return;
      for (const event of batch) if (matches(filter, event)) this.write(event);
      after = (batch.at(-1) as HarnessEvent).eventId;
    }
  }
}

/**
 * The id of the last event a log holds. The file is read backwards, a chunk at a time, to
 * its last newline: what follows it was cut short by a crash and is cut off. Then back
 * from there to the last line that is an event of ours (any line may be longer than a chunk).
 */
function lastEventId(path: string): number {
  mkdirSync(dirname(path), { recursive: true });
  if (!existsSync(path)) return 0;
  const fd = openSync(path, 'r+');
  try {
    const size = fstatSync(fd).size;
    // Whole lines only: the end is just past the last newline.
    let end = 0;
    for (let at = size; at > 0; ) {
      const start = Math.max(0, at - TAIL_BYTES);
      const chunk = Buffer.alloc(at - start);
      readSync(fd, chunk, 0, chunk.length, start);
      const newline = chunk.lastIndexOf(0x0a);
      if (newline >= 0) {
        end = start + newline + 1;
        break;
      }
      at = start;
    }
    if (end < size) truncateSync(path, end);
    // Lines from the end, gathered across chunks (a line may be longer than one), until one carries an event id.
    const idOf = (line: Buffer): number | null => {
      try {
        const id = (JSON.parse(line.toString('utf8')) as { eventId?: unknown }).eventId;
        return typeof id === 'number' ? id : null;
      } catch {
        return null;
      }
    };
    let carry: Buffer[] = [];
    for (let at = end; at > 0; ) {
      const start = Math.max(0, at - TAIL_BYTES);
      const chunk = Buffer.alloc(at - start);
      readSync(fd, chunk, 0, chunk.length, start);
      let cut = chunk.length;
      for (let i = chunk.length - 1; i >= 0; i--) {
        if (chunk[i] !== 0x0a) continue;
        const id = idOf(Buffer.concat([chunk.subarray(i + 1, cut), ...carry]));
        if (id !== null) return id;
        carry = [];
        cut = i;
      }
      carry.unshift(chunk.subarray(0, cut));
      at = start;
    }
    return idOf(Buffer.concat(carry)) ?? 0;
  } finally {
    closeSync(fd);
  }
}

/** A `run` hook: its commands one after another, in the order the events came. */
class Runner {
  readonly #hook: HookSpec;
  readonly #cwd: string;
  readonly #scrubbed: readonly string[];
  readonly #contain: () => ContainedExecutor;
  readonly #fail: (failure: HookFailure) => void;
  readonly #context: () => ObserverContext | null;
  #chain: Promise<void> = Promise.resolve();
  #pending = 0;

  constructor(
    hook: HookSpec,
    cwd: string,
    scrubbed: readonly string[],
    contain: () => ContainedExecutor,
    fail: (failure: HookFailure) => void,
    context: () => ObserverContext | null,
  ) {
    this.#hook = hook;
    this.#cwd = cwd;
    this.#scrubbed = scrubbed;
    this.#contain = contain;
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
    if (Buffer.byteLength(payload) > MAX_EVENT_BYTES)
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
    let result: CommandResult;
    let containment: ContainedReport['rung'] | undefined;
    try {
      const executor = this.#contain();
      containment = executor.contained().rung;
      result = await executor.run({
        argv,
        purpose: 'hook',
        cwd: this.#cwd,
        timeoutMs: this.#hook.timeoutMs,
        outputLimit: 16 * 1024,
        env,
      });
    } catch (error) {
      // The containment the sandbox names cannot be had here: the program is not run with less.
      result = notStarted((error as Error).message);
    }
    if (result.started && result.exitStatus === 0 && !result.timedOut) return;
    const what = describeCommand(argv, result).split('\n')[0] as string;
    const stderr = result.stderr.trim().split('\n')[0]?.slice(0, 200);
    const message = `${what}${stderr ? `: ${stderr}` : ''}`;
    this.#fail({
      hook: this.#hook.name,
      eventId: event.eventId,
      rootId: event.rootId,
      message,
      ...(containment ? { containment } : {}),
    });
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
