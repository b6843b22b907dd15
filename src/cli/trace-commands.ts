/**
 * The commands of `npx io-harness` that read and act on a store: `runs`, `sessions`,
 * `show`, `follow`, `answer`, `resume`, `rewind` and `cost`. Each takes `--store <file>`
 * (default: `$IO_HARNESS_STORE`, else `runs.db` in the current directory), `--json` for
 * scripts and `--help`; the exit statuses are in docs/CONTRACT.md and {@link EXIT}.
 *
 * A store is never made by a command: a path with no file is an error, a file that is not
 * SQLite or not a store of ours is refused unchanged, and the read commands open it
 * read-only. `--store` takes a postgres:// URL too (an empty database is refused, not
 * given tables); every command but `view` reads and acts on it alike.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Config } from '../config/config.js';
import { HarnessError } from '../errors.js';
import { isTerminal } from '../runtime/events.js';
import {
  connectionSecrets,
  holdSecrets,
  isKeyValueConnection,
  maskedConnection,
  scrubText,
} from '../runtime/secrets.js';
import { whereIs } from '../store/either.js';
import { formatCost } from '../store/queries.js';
import { answerQuestion } from '../supervisor/questions.js';
import { rewind, rewindRun } from '../supervisor/rewind.js';
import { Supervisor } from '../supervisor/supervisor.js';
import { CliError, type CliIo, type Command, type Context, EXIT, exitFor, print } from './command.js';
import { readPrices } from './prices.js';
import { addressesOf, describeFollowed, progressLine, progressOn } from './progress.js';
import { clip, renderRun } from './render.js';
import { allRuns, checkStore, findRun, isPostgresUrl, openPostgres, withReader, withStore } from './stores.js';

export type { CliIo } from './command.js';
export { EXIT } from './command.js';

const COMMON = '[--store <file|postgres-url>] [--json]';

export const TRACE_COMMANDS: Record<string, Command> = {
  runs: {
    usage: `io-harness runs ${COMMON} [--status <status>] [--all]`,
    summary: 'list the trees in a store (every run with --all), newest last',
    help: 'Each line: the run id, its status, its steps and tokens, how many runs its tree holds, and its task.\n--status keeps the runs with that status (finished, paused, failed, ...).',
    options: { status: { type: 'string' }, all: { type: 'boolean' } },
    positionals: [0, 0],
    run: runsCommand,
  },
  sessions: {
    usage: `io-harness sessions ${COMMON}`,
    summary: 'list the sessions in a store, with their turns',
    help: 'Each session: its id, its workspace, and its turns (what was said, and how the run ended).',
    options: {},
    positionals: [0, 0],
    run: sessionsCommand,
  },
  show: {
    usage: `io-harness show <run> ${COMMON}`,
    summary: "a run's trace as text: steps, tool calls, refusals, draws, gates, model calls, diffs",
    help: 'A run id, or a prefix of one that names a single run. --json prints the records themselves.',
    options: {},
    positionals: [1, 1],
    run: showCommand,
  },
  follow: {
    usage: `io-harness follow <run> ${COMMON} [--interval <ms>]`,
    summary: "tail a run's tree from another process until it settles, with a progress line",
    help: "Prints the tree's events as they are committed (--json: one JSON line each), and a progress\nline on stderr; ends when every run of the tree has ended or paused. Exit 0 when the root\nfinished, 5 when it ended otherwise.",
    options: { interval: { type: 'string' } },
    positionals: [1, 1],
    run: followCommand,
  },
  answer: {
    usage: `io-harness answer <question> <answer> ${COMMON} [--by <name>]`,
    summary: 'answer a parked approval, question or plan',
    help: 'An approval takes approve or deny; a question, its text; a plan, approve, cancel or a JSON\n{ "decision": "correct", "steps": [{ "description": "..." }] }; an intent, retry, skip or abort.\nThe first answer stands. Then `io-harness resume <run>` carries the run on.',
    options: { by: { type: 'string' } },
    positionals: [2, 2],
    run: answerCommand,
  },
  resume: {
    usage: `io-harness resume <run> ${COMMON} [--accept-changes]`,
    summary: "drive a run's tree on from its last committed step, to its end",
    help: 'Uses the provider the run was started with, its key read from the environment variable its\nspec names (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...). An ask the policy puts finds no approver\nhere and is refused, saying so. A tree started under another release of io-harness is refused\n(FINGERPRINT_CHANGED) unless --accept-changes, which its trace records. Exit 0 when the root\nfinished, 5 when it ended otherwise.',
    options: { 'accept-changes': { type: 'boolean' } },
    positionals: [1, 1],
    run: resumeCommand,
  },
  rewind: {
    usage: `io-harness rewind <run> [path] ${COMMON} [--root <dir>]`,
    summary: 'put back the files a run changed (one file, or all of them)',
    help: "The workspace is the run's own (its contract's root) unless --root names it. With a path,\nthat file alone goes back to what it was before the run first touched it.",
    options: { root: { type: 'string' } },
    positionals: [1, 2],
    run: rewindCommand,
  },
  view: {
    usage: 'io-harness view [<file>] [--store <file|postgres-url>] [--port <port>] [--host <address>]',
    summary: 'a read-only page on loopback showing the store: trees live, agents, steps, diffs',
    help: 'Serves the trace viewer on 127.0.0.1 (or --host ::1) until interrupted, and prints its address.\nThe store is the file given, or --store (a file, or a postgres:// URL). It is only read; runs going on elsewhere are followed live.',
    options: { port: { type: 'string' }, host: { type: 'string' } },
    positionals: [0, 1],
    run: viewCommand,
  },
  store: {
    usage: 'io-harness store copy <file> <postgres-url> [--schema <name>] [--json]',
    summary: 'copy a SQLite store into an empty PostgreSQL one, every table and every ledger checked',
    help: "Copies every row of <file> (a store of ours) into the PostgreSQL store at <postgres-url>, which\nmust hold no rows yet (an empty database gets the store's tables; --schema keeps them in a\nschema of their own). One transaction: every table's count and every tree's ledger are read\nback from both before it commits, and nothing is kept if any differs. <file> is only read\n(an older store is brought forward first, as opening it does).",
    options: { schema: { type: 'string' } },
    positionals: [3, 3],
    run: storeCommand,
  },
  cost: {
    usage: `io-harness cost <run> ${COMMON} [--prices <file>]`,
    summary: "what a run's tree cost, priced by a table",
    help: 'The table is --prices <file>: JSON ({ "model": { "input": 3, "output": 15 } }, dollars per\nmillion tokens, cacheRead and cacheWrite optional) or TOML ([prices.model] as io.toml has it).\nWithout it, the [prices] of the configuration of the current directory.',
    options: { prices: { type: 'string' } },
    positionals: [1, 1],
    run: costCommand,
  },
};

/** The command list `io-harness --help` prints. */
export function traceCommandsHelp(): string {
  const width = Math.max(...Object.keys(TRACE_COMMANDS).map((name) => name.length));
  return Object.entries(TRACE_COMMANDS)
    .map(([name, command]) => `  ${name.padEnd(width)}  ${command.summary}`)
    .join('\n');
}

const defaultIo = (): CliIo => ({
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  env: process.env,
  cwd: process.cwd(),
  tty: process.stderr.isTTY === true,
});

/** Runs one command; resolves to its exit status (it never exits the process itself). */
export async function runTraceCommand(name: string, args: string[], raw: CliIo = defaultIo()): Promise<number> {
  // A database password in --store or in a command's arguments (store copy's target, in URL or
  // key/value form) is held before anything is printed, and no line printed says a held secret.
  for (const arg of args) holdSecrets(connectionSecrets(arg));
  if (raw.env.IO_HARNESS_STORE) holdSecrets(connectionSecrets(raw.env.IO_HARNESS_STORE));
  const io: CliIo = { ...raw, out: (text) => raw.out(scrubText(text)), err: (text) => raw.err(scrubText(text)) };
  const command = TRACE_COMMANDS[name];
  if (!command) {
    io.err(`io-harness: there is no command ${JSON.stringify(name)}\n`);
    return EXIT.usage;
  }
  const usage = `usage: ${command.usage}`;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      strict: true,
      options: {
        ...command.options,
        store: { type: 'string' },
        schema: { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    io.err(`io-harness ${name}: ${(error as Error).message}\n${usage}\n`);
    return EXIT.usage;
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) {
    io.out(
      `${usage}\n\n${command.summary}.\n${command.help}\n\n--store <file>  the store: a SQLite file, or a postgres:// URL (default: $IO_HARNESS_STORE, else ./runs.db)\n--schema <name> with a postgres:// store, the schema it is in (default public)\n--json          machine-readable output\n`,
    );
    return EXIT.ok;
  }
  const [fewest, most] = command.positionals;
  if (parsed.positionals.length < fewest || parsed.positionals.length > most) {
    io.err(
      `io-harness ${name}: ${parsed.positionals.length < fewest ? 'an argument is missing' : `unexpected argument ${JSON.stringify(parsed.positionals[most])}`}\n${usage}\n`,
    );
    return EXIT.usage;
  }
  const given = (values.store as string | undefined) ?? io.env.IO_HARNESS_STORE ?? 'runs.db';
  if (isKeyValueConnection(given) && /\bhost\s*=|\bpassword\s*=|\bdbname\s*=/i.test(given)) {
    io.err(
      `io-harness ${name}: --store takes a file or a postgres:// URL, not a connection string in key/value form (got ${JSON.stringify(maskedConnection(given))}).\n${usage}\n`,
    );
    return EXIT.usage;
  }
  // A PostgreSQL store is named by its URL; a file, by its path from here.
  const storePath = isPostgresUrl(given) ? given : resolve(io.cwd, given);
  if (values.schema !== undefined && !isPostgresUrl(given) && name !== 'store') {
    io.err(`io-harness ${name}: --schema names a PostgreSQL schema; it goes with --store postgres://...\n${usage}\n`);
    return EXIT.usage;
  }
  try {
    return await command.run({ io, positionals: parsed.positionals, values, json: values.json === true, storePath });
  } catch (error) {
    if (error instanceof CliError) {
      io.err(`io-harness ${name}: ${error.message}\n`);
      return error.exit;
    }
    if (HarnessError.isInstance(error)) {
      io.err(`io-harness ${name}: ${error.message}\n`);
      return exitFor(error.code);
    }
    io.err(`io-harness ${name}: ${(error as Error).stack ?? String(error)}\n`);
    return EXIT.failed;
  }
}

async function storeCommand(context: Context): Promise<number> {
  const [action, file, url] = context.positionals as [string, string, string];
  if (action !== 'copy')
    throw new CliError(
      `store has one action, copy (io-harness store copy <file> <postgres-url>); got ${JSON.stringify(action)}.`,
      EXIT.usage,
    );
  if (!/^postgres(ql)?:\/\//i.test(url))
    throw new CliError(
      `the target is a PostgreSQL URL, such as postgres://user@localhost:5432/harness; got ${JSON.stringify(maskedConnection(url))}.`,
      EXIT.usage,
    );
  const source = resolve(context.io.cwd, file);
  await checkStore(source);
  const { copyStore } = await import('../store/postgres/copy.js');
  const schema = context.values.schema as string | undefined;
  const report = await copyStore(source, url, schema === undefined ? {} : { schema });
  if (context.json) {
    context.io.out(`${JSON.stringify(report)}\n`);
    return EXIT.ok;
  }
  const rows = Object.entries(report.tables)
    .filter(([, count]) => count > 0)
    .map(([table, count]) => `${table} ${count}`)
    .join(', ');
  context.io.out(
    `copied ${source} into ${report.target}: ${report.trees} tree${report.trees === 1 ? '' : 's'}; rows ${rows || 'none'}.\n` +
      "Every table's count and every tree's ledger were read back from both before the copy was committed.\n",
  );
  return EXIT.ok;
}

async function runsCommand(context: Context): Promise<number> {
  const status = context.values.status as string | undefined;
  return withReader(context, async (reader) => {
    const roots = await reader.runs();
    const listed = (context.values.all ? await allRuns(reader) : roots).filter(
      (run) => status === undefined || run.status === status,
    );
    const rows = [];
    for (const run of listed) {
      const account = await reader.account(run.runId);
      rows.push({
        runId: run.runId,
        rootId: run.rootId,
        address: run.address,
        status: run.status,
        task: run.task,
        steps: account?.spent.steps ?? 0,
        tokens: account?.spent.tokens ?? 0,
        runs: run.parentId === null ? (await reader.runs(run.runId)).length : null,
        createdAt: run.createdAt,
        endedAt: run.endedAt,
      });
    }
    if (context.json) {
      print(context, rows);
      return EXIT.ok;
    }
    if (rows.length === 0) {
      context.io.out(
        status ? `no runs with status ${status} in ${whereIs(reader)}\n` : `no runs in ${whereIs(reader)}\n`,
      );
      return EXIT.ok;
    }
    for (const row of rows)
      context.io.out(
        `${row.runId}  ${row.status.padEnd(18)} ${String(row.steps).padStart(4)} steps ${String(row.tokens).padStart(8)} tokens${row.runs === null ? `  ${row.address}` : `  ${row.runs} run${row.runs === 1 ? '' : 's'}`}  ${clip(row.task, 60)}\n`,
      );
    return EXIT.ok;
  });
}

async function sessionsCommand(context: Context): Promise<number> {
  return withReader(context, async (reader) => {
    const sessions = [];
    for (const session of await reader.sessions())
      sessions.push({
        ...session,
        turns: (await reader.turns(session.sessionId)).map((turn) => ({
          turnId: turn.turnId,
          text: turn.text,
          status: turn.status,
          runId: turn.runId,
        })),
      });
    if (context.json) {
      print(context, sessions);
      return EXIT.ok;
    }
    if (sessions.length === 0) context.io.out(`no sessions in ${whereIs(reader)}\n`);
    for (const session of sessions) {
      context.io.out(`${session.sessionId}  ${session.turns.length} turns  ${session.root ?? '(no workspace)'}\n`);
      for (const turn of session.turns)
        context.io.out(`  ${turn.turnId}  ${String(turn.status).padEnd(12)} ${clip(turn.text, 70)}\n`);
    }
    return EXIT.ok;
  });
}

async function showCommand(context: Context): Promise<number> {
  return withReader(context, async (reader) => {
    const run = await findRun(reader, context.positionals[0] as string);
    if (context.json) {
      print(context, {
        run,
        account: await reader.account(run.runId),
        steps: await reader.steps(run.runId),
        events: await reader.events(run.runId),
        modelCalls: await reader.modelCalls({ runId: run.runId }),
        webSources: await reader.webSources(run.runId),
        gates: await reader.gateEvaluations(run.runId),
        questions: await reader.questions({ runId: run.runId }),
        children: (await reader.runs(run.rootId)).filter((other) => other.parentId === run.runId),
        patch: await reader.patch(run.runId),
      });
      return EXIT.ok;
    }
    context.io.out(await renderRun(reader, run));
    return EXIT.ok;
  });
}

async function followCommand(context: Context): Promise<number> {
  const interval = context.values.interval === undefined ? 200 : Number(context.values.interval);
  if (!Number.isInteger(interval) || interval < 10 || interval > 60_000)
    throw new CliError(
      '--interval is how often to look, in milliseconds: a whole number from 10 to 60000.',
      EXIT.usage,
    );
  return withReader(context, async (reader) => {
    const rootId = (await findRun(reader, context.positionals[0] as string)).rootId;
    const { io } = context;
    let after = 0;
    const progress = progressOn(io);
    const started = Date.now();
    let addresses = addressesOf(await reader.runs(rootId));
    for (;;) {
      const events = await reader.treeEvents(rootId, after);
      // A run that started since the last look is named by its address too.
      if (events.some((event) => !addresses.has(event.runId))) addresses = addressesOf(await reader.runs(rootId));
      for (const event of events) {
        after = event.eventId;
        progress.above();
        io.out(context.json ? `${JSON.stringify(event)}\n` : `${describeFollowed(event, addresses)}\n`);
      }
      const runs = await reader.runs(rootId);
      const settled = runs.every((run) => isTerminal(run.status) || run.status === 'paused');
      progress.show(await progressLine(reader, rootId, runs, Date.now() - started));
      if (settled && (await reader.treeEvents(rootId, after)).length === 0) {
        progress.end();
        const root = await reader.run(rootId);
        return root?.status === 'finished' ? EXIT.ok : EXIT.unfinished;
      }
      await new Promise((done) => setTimeout(done, interval));
    }
  });
}

async function answerCommand(context: Context): Promise<number> {
  const [questionId, text] = context.positionals as [string, string];
  return withStore(context, async (store) => {
    const question = await store.question(questionId);
    if (!question)
      throw new CliError(
        `there is no question ${questionId} in ${whereIs(store)}; \`io-harness show <run>\` lists a run's open questions.`,
        EXIT.notFound,
      );
    const answer = answerValue(question.kind, text);
    const by = (context.values.by as string | undefined) ?? context.io.env.USER ?? `pid ${process.pid}`;
    const { runId, rootId } = await answerQuestion(store, questionId, answer, { by });
    if (context.json) print(context, { questionId, kind: question.kind, answer, by, runId, rootId });
    else
      context.io.out(
        `answered ${question.kind} ${questionId}: ${JSON.stringify(answer)}\ncarry the run on with: io-harness resume ${rootId}${context.values.store ? ` --store ${context.values.store}` : ''}\n`,
      );
    return EXIT.ok;
  });
}

/** An answer as the command line spells it, as its kind of question takes it. */
function answerValue(kind: string, text: string): unknown {
  const trimmed = text.trim();
  if (kind === 'plan') {
    if (trimmed === 'approve' || trimmed === 'cancel') return { decision: trimmed };
    try {
      return JSON.parse(trimmed);
    } catch {
      throw new CliError(
        'a plan is answered with approve, cancel, or JSON such as {"decision":"correct","steps":[{"description":"..."}]}.',
        EXIT.usage,
      );
    }
  }
  return kind === 'question' ? text : trimmed;
}

async function resumeCommand(context: Context): Promise<number> {
  return withStore(context, async (store) => {
    const rootId = (await findRun(store, context.positionals[0] as string)).rootId;
    const { io } = context;
    // A tree with nothing left to run is not resumed: said so, with how it ended.
    const runs = await store.runs(rootId);
    if (runs.length > 0 && runs.every((run) => isTerminal(run.status))) {
      const root = runs.find((run) => run.runId === rootId);
      const status = root?.status ?? 'ended';
      if (context.json) print(context, { rootId, status, resumed: false });
      else
        io.out(
          `tree ${rootId} has ${status === 'finished' ? 'finished' : `ended (${status})`}: every run of it has ended, so there is nothing to resume. \`io-harness show ${rootId.slice(0, 8)}\` shows how.\n`,
        );
      return status === 'finished' ? EXIT.ok : EXIT.unfinished;
    }
    let addresses = addressesOf(runs);
    const supervisor = await Supervisor.start(store);
    const started = Date.now();
    const progress = progressOn(io);
    // Drawn in turn: a line read while the last is still being read waits for it, so lines never cross.
    let drawing: Promise<void> = Promise.resolve();
    const show = () => {
      drawing = drawing
        .then(async () =>
          progress.show(await progressLine(store, rootId, await store.runs(rootId), Date.now() - started)),
        )
        .catch(() => undefined);
    };
    const unobserve = supervisor.observe(
      (event) => {
        progress.above();
        if (event.type === 'run-start' && !addresses.has(event.runId))
          addresses = new Map([...addresses, [event.runId, event.address]]);
        if (!context.json) io.out(`${describeFollowed(event, addresses)}\n`);
        show();
      },
      { rootId },
    );
    let stopped = false;
    const stop = () => {
      if (!stopped) unobserve();
      stopped = true;
    };
    try {
      const acceptChanges = context.values['accept-changes'] === true;
      const result = await (await supervisor.resume(rootId, acceptChanges ? { acceptChanges } : {})).result;
      // No line drawn after the result: the observer goes first, then the last line is let finish.
      stop();
      await drawing;
      progress.end();
      if (context.json) print(context, result);
      else
        io.out(
          `${result.status}${result.reason ? `: ${result.reason}` : ''}${result.reply ? `\n${result.reply}` : ''}\n`,
        );
      return result.status === 'finished' ? EXIT.ok : EXIT.unfinished;
    } finally {
      stop();
      await supervisor.close();
    }
  });
}

async function rewindCommand(context: Context): Promise<number> {
  const [given, path] = context.positionals as [string, string | undefined];
  return withStore(context, async (store) => {
    const run = await findRun(store, given);
    const spec = (await store.spec(run.runId)) as { contract?: { root?: string } } | null;
    const root = (context.values.root as string | undefined) ?? spec?.contract?.root;
    if (!root)
      throw new CliError(
        `run ${run.runId} was not a workspace run, so it changed no files; pass --root <dir> if you mean a workspace.`,
        EXIT.usage,
      );
    const workspace = resolve(context.io.cwd, root);
    // The store names the workspace; a store from elsewhere could name any directory. Without
    // --root, only the directory this command runs in, or one inside it, is written.
    const here = resolve(context.io.cwd);
    if (context.values.root === undefined && workspace !== here && !workspace.startsWith(`${here}/`))
      throw new CliError(
        `run ${run.runId} worked in ${workspace}, which is not this directory or inside it; run rewind from there, or pass --root ${workspace} to say that is the workspace to write.`,
        EXIT.usage,
      );
    const result =
      path === undefined
        ? await rewindRun(workspace, store, run.runId)
        : { files: [await rewind(workspace, store, run.runId, path)], cancelled: [] as string[] };
    if (context.json) print(context, { runId: run.runId, root: workspace, ...result });
    else {
      if (result.files.length === 0) context.io.out(`run ${run.runId} changed no files\n`);
      for (const file of result.files) context.io.out(`${file.action.padEnd(9)} ${file.path}\n`);
      if (result.cancelled.length > 0) context.io.out(`cancelled ${result.cancelled.length} waiting children\n`);
    }
    return EXIT.ok;
  });
}

async function costCommand(context: Context): Promise<number> {
  const file = context.values.prices as string | undefined;
  const prices = file ? readPrices(resolve(context.io.cwd, file)) : Config.discover(context.io.cwd).prices();
  if (Object.keys(prices).length === 0)
    throw new CliError('no prices: pass --prices <file> (JSON or TOML), or set [prices] in your io.toml.', EXIT.usage);
  return withReader(context, async (reader) => {
    const run = await findRun(reader, context.positionals[0] as string);
    const report = await reader.cost(run.rootId, prices);
    if (context.json) print(context, { rootId: run.rootId, ...report });
    else {
      context.io.out(`${run.rootId}: ${report.text}\n`);
      for (const [model, amount] of Object.entries(report.byModel))
        context.io.out(`  ${model}  ${formatCost(amount)}\n`);
    }
    return EXIT.ok;
  });
}

async function viewCommand(context: Context): Promise<number> {
  const file = context.positionals[0];
  const path = file === undefined ? context.storePath : isPostgresUrl(file) ? file : resolve(context.io.cwd, file);
  const port = context.values.port === undefined ? 0 : Number(context.values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new CliError('--port is a port number from 0 to 65535 (0: one the system picks).', EXIT.usage);
  // A PostgreSQL store must be one already (an empty database is refused, never given tables); the viewer reads it on a pool of its own.
  const postgres = isPostgresUrl(path) ? await openPostgres(path, context.values.schema as string | undefined) : null;
  if (!postgres) await checkStore(path);
  const { viewer } = await import('../viewer/server.js');
  const host = context.values.host as string | undefined;
  let served: Awaited<ReturnType<typeof viewer>>;
  try {
    served = await viewer(postgres ?? path, { port, ...(host ? { host } : {}) });
  } catch (error) {
    await postgres?.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES')
      throw new CliError(
        `port ${port} cannot be had (${code}); pass another --port, or 0 for one the system picks.`,
        EXIT.usage,
      );
    throw error;
  }
  // A PostgreSQL URL is shown with its password hidden.
  const shown = postgres?.url ?? path;
  context.io.out(
    context.json ? `${JSON.stringify({ url: served.url, store: shown })}\n` : `viewing ${shown} at ${served.url}\n`,
  );
  await new Promise<void>((done) => {
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  try {
    await served.close();
  } finally {
    await postgres?.close();
  }
  return EXIT.ok;
}
