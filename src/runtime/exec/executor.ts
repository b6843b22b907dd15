/**
 * The executor: the one way the runtime starts a child process. exec, shell, shell_start,
 * a command gate, the toolchain's checker and a hook each ask it, naming what the command
 * is for; an MCP stdio server's command line is wrapped by it. Every executor comes from the
 * executor factory (./factory.ts), which puts containment (./containment/contained.ts)
 * around the direct executor below: the program looked up on PATH, in its own PID
 * namespace where Linux allows it and its own process group always, killed with everything
 * it started at a timeout or a cancel, its output bounded (see ./run-command.ts). Nothing
 * outside src/runtime/exec names the direct executor (test/layout.test.ts).
 */
import type { ContainedReport } from './containment/contained.js';
import type { ProbeReport } from './containment/probe.js';
import type { CommandOrigin } from './containment/proxy.js';
import { type Job, startJob } from './jobs.js';
import {
  type CommandOptions,
  type CommandResult,
  type Containment,
  processContainment,
  runCommand,
} from './run-command.js';

/** What a command is started for. */
export type CommandPurpose = 'exec' | 'shell' | 'shell_start' | 'gate' | 'checker' | 'probe' | 'hook';

/** A command to run to its end. */
export interface CommandRequest extends CommandOptions {
  argv: readonly string[];
  purpose: CommandPurpose;
  /** The tool call the command runs for: its connections through the egress proxy are recorded against it. */
  origin?: CommandOrigin;
}

/** A command to start in the background (shell_start); its output is kept, bounded, until polled. */
export interface JobRequest {
  argv: readonly string[];
  cwd: string;
  /** Characters of output kept between polls. */
  outputLimit: number;
  env: NodeJS.ProcessEnv;
  purpose: CommandPurpose;
  /** See {@link CommandOptions.bare}. */
  bare?: boolean;
  /** See {@link CommandRequest.origin}. */
  origin?: CommandOrigin;
  /** Called when the job has ended with what its wrapper reported on descriptor 3 (see CommandOptions.counted). */
  counted?: (report: string) => void;
}

export interface Executor {
  /** Runs a command to its end; a command that cannot start is a result that says so, never a throw. */
  run(request: CommandRequest): Promise<CommandResult>;
  /** Starts a command in the background. */
  start(request: JobRequest): Job;
  /** How this executor keeps a command from outliving its end, as the trace records it. */
  containment(): Containment;
  /** What a containing executor gives the run's commands (see ContainedExecutor); absent for one that does not contain. */
  contained?(): ContainedReport;
  /** What a containing executor's canary found on its rung (run once, before the first command). */
  probe?(): Promise<ProbeReport>;
  /** Ends what the executor holds for its run (a sandbox's own directories); called when the run's session closes. */
  close?(): Promise<void>;
}

/** Spawns each command directly (see the module's comment). */
export const directExecutor: Executor = {
  run: (request) => runCommand(request.argv, request),
  start: (request) =>
    startJob(request.argv, request.cwd, request.outputLimit, request.env, request.bare, request.counted),
  containment: processContainment,
};
