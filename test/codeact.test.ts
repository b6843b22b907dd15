/**
 * Programs instead of call chains (`withCodeAct()`), in each language, on the host's real
 * interpreters under the run's real containment: twelve reads and a write as one model
 * call; a refusal raised inside the program, which goes on; the program's own writes and
 * sockets stopped; a host SIGKILLed mid-program resuming without making a committed act
 * again and pausing on the one in flight; a host without the interpreter running on plain
 * tool calls with the fallback recorded; and the act cap.
 */

import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  answerQuestion,
  CallbackApprover,
  Config,
  Policy,
  runWith,
  Store,
  Supervisor,
  TaskContract,
} from '../dist/index.js';
import { hostRungs } from '../dist/runtime/exec/containment/rungs.js';
import { Driver, noneLeftUnder, tempStorePath } from './support/processes.js';
import { type Answer, later, openStore, serve, tempWorkspace, turns } from './support/workspace.js';

const LANGUAGES = ['python', 'javascript'] as const;
type Language = (typeof LANGUAGES)[number];

// Commands and code an interpreter runs are let be (a program's own start is asked about as such on a rung that cannot confine it).
const POLICY = Policy.default().layer('test').allowExec('<arbitrary code>*').allowExec('*').denyRead('secret.txt');

/** Twelve files, each naming a number, and a secret the policy keeps back. */
function twelveFiles(): string {
  const files: Record<string, string> = { 'secret.txt': 'hunter2\n' };
  for (let i = 1; i <= 12; i++) files[`notes/${String(i).padStart(2, '0')}.txt`] = `item ${i} weighs ${i * 3}\n`;
  return tempWorkspace(files);
}

/** The summary every run writes: the weights, one a line, and their total. */
const SUMMARY = `${Array.from({ length: 12 }, (_, i) => (i + 1) * 3).join('\n')}\ntotal 234\n`;

const PROGRAMS: Record<Language, { summary: string; refused: string; caps: string; escape: (port: number) => string }> =
  {
    python: {
      summary: [
        'weights = []',
        'for i in range(1, 13):',
        '    text = read_file("notes/%02d.txt" % i)',
        '    weights.append(int(text.split()[-1]))',
        'write_file(path="summary.txt", content="\\n".join(str(w) for w in weights) + "\\ntotal %d\\n" % sum(weights))',
        'print("wrote", len(weights))',
      ].join('\n'),
      refused: [
        'try:',
        '    read_file(path="secret.txt")',
        '    print("READ THE SECRET")',
        'except Refused as error:',
        '    print("refused by", error.rule, "in", error.layer)',
        'write_file(path="after.txt", content="went on\\n")',
      ].join('\n'),
      caps: 'for i in range(1, 6):\n    read_file("notes/%02d.txt" % i)\n    print("read", i)\n',
      escape: (port) =>
        [
          'import socket',
          'for target in ["OUTSIDE", "inside.txt"]:',
          '    try:',
          '        open(target, "w").write("x")',
          '        print("WROTE", target)',
          '    except OSError as error:',
          '        print("write stopped:", target, error.strerror)',
          'try:',
          `    socket.create_connection(("127.0.0.1", ${port}), timeout=5).recv(8)`,
          '    print("CONNECTED")',
          'except OSError as error:',
          '    print("socket stopped:", error)',
        ].join('\n'),
    },
    javascript: {
      summary: [
        'const weights = [];',
        'for (let i = 1; i <= 12; i++) {',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a JavaScript program's own template literal
        "  const text = read_file(`notes/${String(i).padStart(2, '0')}.txt`);",
        '  weights.push(Number(text.trim().split(/\\s+/).pop()));',
        '}',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a JavaScript program's own template literal
        "write_file({ path: 'summary.txt', content: `${weights.join('\\n')}\\ntotal ${weights.reduce((a, b) => a + b, 0)}\\n` });",
        "console.log('wrote', weights.length);",
      ].join('\n'),
      refused: [
        'try {',
        "  read_file({ path: 'secret.txt' });",
        "  console.log('READ THE SECRET');",
        '} catch (error) {',
        '  if (!(error instanceof Refused)) throw error;',
        "  console.log('refused by', error.rule, 'in', error.layer);",
        '}',
        "write_file('after.txt', 'went on\\n');",
      ].join('\n'),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a JavaScript program's own template literal
      caps: "for (let i = 1; i <= 5; i++) { read_file(`notes/0${i}.txt`); console.log('read', i); }",
      escape: (port) =>
        [
          "const fs = require('node:fs');",
          "const net = require('node:net');",
          "for (const target of ['OUTSIDE', 'inside.txt']) {",
          "  try { fs.writeFileSync(target, 'x'); console.log('WROTE', target); }",
          "  catch (error) { console.log('write stopped:', target, error.code); }",
          '}',
          'await new Promise((resolve) => {',
          `  const socket = net.connect(${port}, '127.0.0.1');`,
          "  const timer = setTimeout(() => { console.log('socket stopped: no answer'); socket.destroy(); resolve(); }, 5000);",
          "  socket.on('connect', () => { console.log('CONNECTED'); clearTimeout(timer); socket.destroy(); resolve(); });",
          "  socket.on('error', (error) => { console.log('socket stopped:', error.code); clearTimeout(timer); resolve(); });",
          '});',
        ].join('\n'),
    },
  };

function program(language: Language, source: string): Answer {
  return { toolCalls: [{ name: 'run_program', args: { language, source } }] };
}

async function run(
  root: string,
  answers: Answer[],
  contract = TaskContract.workspace('sum the weights', root).withCodeAct(),
) {
  const store = await openStore();
  const { server, provider } = await serve(turns([...answers, { text: 'done' }]));
  const result = await runWith(contract, provider, store, POLICY);
  const observations = store.steps(result.runId).flatMap((step) => step.observations.map((o) => o.content));
  const events = store.events(result.runId);
  const first = server.calls[0]?.body as { tools?: { function: { name: string } }[] } | undefined;
  return {
    result,
    observations,
    events,
    calls: server.calls.length,
    tools: (first?.tools ?? []).map((tool) => tool.function.name),
  };
}

describe.each(LANGUAGES)('a program in %s', (language) => {
  it('reads twelve files and writes a summary in one model call, where tool calls take thirteen', async () => {
    const asProgram = twelveFiles();
    const one = await run(asProgram, [program(language, PROGRAMS[language].summary)]);
    expect(one.result.outcome.kind, one.observations.join('\n')).toBe('finished');
    expect(one.tools).toContain('run_program');
    expect(readFileSync(join(asProgram, 'summary.txt'), 'utf8')).toBe(SUMMARY);
    expect(one.observations[0]).toMatch(/program exited with status 0; 13 acts \(read_file ×12, write_file ×1\)/);
    expect(one.observations[0]).toContain('wrote 12');
    // Every act is in the trace under the program's call: twelve reads and the write.
    const acts = one.events.filter((event) => event.type === 'program-act');
    expect(acts.map((event) => (event as { tool: string }).tool)).toEqual([
      ...Array(12).fill('read_file'),
      'write_file',
    ]);
    expect(acts.every((event) => (event as { isError?: boolean }).isError === false)).toBe(true);
    expect(one.events.filter((event) => event.type === 'file-changed')).toHaveLength(1);

    const asCalls = twelveFiles();
    const reads: Answer[] = Array.from({ length: 12 }, (_, i) => ({
      toolCalls: [{ name: 'read_file', args: { path: `notes/${String(i + 1).padStart(2, '0')}.txt` } }],
    }));
    const thirteen = await run(asCalls, [
      ...reads,
      { toolCalls: [{ name: 'write_file', args: { path: 'summary.txt', content: SUMMARY } }] },
    ]);
    expect(thirteen.result.outcome.kind).toBe('finished');
    expect(readFileSync(join(asCalls, 'summary.txt'), 'utf8')).toBe(SUMMARY);
    // The work: one model call against thirteen; each run then answers once more.
    expect(one.calls).toBe(1 + 1);
    expect(thirteen.calls).toBe(13 + 1);
  });

  it('raises a refused act inside the program, naming the rule, and the program goes on', async () => {
    const root = twelveFiles();
    const { result, observations, events } = await run(root, [program(language, PROGRAMS[language].refused)]);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain('refused by deny-read secret.txt in test');
    expect(observations[0]).not.toContain('READ THE SECRET');
    expect(observations[0]).not.toContain('hunter2');
    expect(observations[0]).toContain('1 refused');
    expect(readFileSync(join(root, 'after.txt'), 'utf8')).toBe('went on\n');
    const refusal = events.find((event) => event.type === 'refusal');
    expect(refusal).toMatchObject({ tool: 'read_file', rule: 'deny-read secret.txt', layer: 'test' });
    expect((refusal as { callId: string }).callId).toMatch(/\.0$/);
  });

  it('is stopped by containment from writing for itself, in the workspace or outside it, and from opening a socket', async () => {
    const rungs = hostRungs();
    const rung = rungs.bubblewrap.ok ? 'bubblewrap' : rungs.landlock.ok ? 'landlock' : 'namespaces';
    let connections = 0;
    const listener = createServer((socket) => {
      connections++;
      socket.end('hello');
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    later(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    const port = (listener.address() as { port: number }).port;
    const root = twelveFiles();
    const outside = join(tempWorkspace(), 'outside.txt');
    const source = PROGRAMS[language].escape(port).replace('OUTSIDE', outside);
    // The policy lets commands dial anywhere: a program still has no network of its own.
    const contract = TaskContract.workspace('try to escape', root).withCodeAct().withSandbox({ rung });
    const store = await openStore();
    const { provider } = await serve(turns([program(language, source), { text: 'done' }]));
    const result = await runWith(contract, provider, store, POLICY.allowNet('*'));
    const observation = store.steps(result.runId)[0]?.observations[0]?.content ?? '';
    expect(observation, `on ${rung}`).toContain(`write stopped: ${outside}`);
    expect(observation).toContain('write stopped: inside.txt');
    expect(observation).toContain('socket stopped:');
    expect(observation).not.toContain('WROTE');
    expect(observation).not.toContain('CONNECTED');
    expect(existsSync(outside)).toBe(false);
    expect(existsSync(join(root, 'inside.txt'))).toBe(false);
    expect(connections).toBe(0);
  });

  it('is ended past its cap on acts, with the acts before it made', async () => {
    const root = twelveFiles();
    const contract = TaskContract.workspace('read', root).withCodeAct({ maxActs: 3 });
    const { result, observations, events } = await run(root, [program(language, PROGRAMS[language].caps)], contract);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain(
      'was ended: it asked for more than 3 acts, the most one program may make (maxActs)',
    );
    expect(observations[0]).toContain('read 3');
    expect(observations[0]).not.toContain('read 4');
    expect(events.filter((event) => event.type === 'program-act')).toHaveLength(3);
  });

  it('resumes after a SIGKILL mid-program without making a committed act again, and pauses on the one in flight', {
    timeout: 120_000,
  }, async () => {
    const path = tempStorePath();
    const root = tempWorkspace();
    const log = join(root, 'marks.log');
    const started = join(tempWorkspace(), 'hang-started');
    const base = {
      store: path,
      wireScript: 'codeact#programScript',
      options: { language },
      tools: 'codeact#markTools',
      toolOptions: { log, started },
      workspace: { goal: 'mark three times', root, codeact: {} },
    };
    const first = new Driver({ ...base, mode: 'run' });
    later(() => {
      first.child.kill('SIGKILL');
    });
    for (let i = 0; i < 1200 && !existsSync(started); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(existsSync(started), first.stderr).toBe(true);
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(readFileSync(log, 'utf8')).toBe('one\ntwo\nthree\n');

    const second = new Driver({ ...base, mode: 'resume', rootId: first.rootId as string });
    later(() => {
      second.child.kill('SIGKILL');
    });
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('paused');
    // The program ran again: its three marks answered from the journal, not made again.
    expect(readFileSync(log, 'utf8')).toBe('one\ntwo\nthree\n');
    const store = await Store.open(path);
    later(() => store.close());
    const open = store.questions({ status: 'open' });
    // The question names the act, its place in the program and a fingerprint of what it asked.
    expect(open).toMatchObject([
      { kind: 'intent', payload: { kind: 'tool', detail: expect.stringMatching(/^hang \{\} \[act [0-9a-f]{16}\]$/) } },
    ]);
    expect(open[0]?.questionId).toMatch(/^intent:[^:]+:1:0\.3#[0-9a-f]{16}@\d+$/);
    answerQuestion(store, open[0]?.questionId as string, 'skip', { by: 'operator' });

    const third = new Driver({ ...base, mode: 'resume', rootId: first.rootId as string });
    later(() => {
      third.child.kill('SIGKILL');
    });
    await third.exited;
    expect(third.result?.status, third.stderr).toBe('finished');
    expect(readFileSync(log, 'utf8')).toBe('one\ntwo\nthree\n');
    const observation = store.steps(first.rootId as string)[0]?.observations[0]?.content ?? '';
    // The skipped act raised inside the program, which ended there.
    expect(observation).toContain('4 acts (mark ×3, hang ×1)');
    expect(observation).toContain('interrupted by a crash and the operator chose to skip it');
    expect(observation).not.toContain('after the hang');
  });

  it('ends a program run again after a crash that takes another path, and makes no act twice', {
    timeout: 120_000,
  }, async () => {
    const path = tempStorePath();
    const root = tempWorkspace({ 'word.txt': 'A\n' });
    const log = join(tempWorkspace(), 'marks.log');
    const started = join(tempWorkspace(), 'hang-started');
    const base = {
      store: path,
      wireScript: 'codeact#programScript',
      options: { language, variant: 'from-file' },
      tools: 'codeact#markTools',
      toolOptions: { log, started },
      workspace: { goal: 'mark the word', root, codeact: {} },
    };
    const first = new Driver({ ...base, mode: 'run' });
    later(() => {
      first.child.kill('SIGKILL');
    });
    for (let i = 0; i < 1200 && !existsSync(started); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    first.child.kill('SIGKILL');
    await first.exited;
    expect(readFileSync(log, 'utf8')).toBe('A\n');
    // The program reads another word when it runs again: a read where its mark was journaled, the mark moved on.
    writeFileSync(join(root, 'word.txt'), 'B\n');
    const second = new Driver({ ...base, mode: 'resume', rootId: first.rootId as string });
    later(() => {
      second.child.kill('SIGKILL');
    });
    await second.exited;
    expect(second.result?.status, second.stderr).toBe('finished');
    expect(readFileSync(log, 'utf8')).toBe('A\n');
    const store = await Store.open(path);
    later(() => store.close());
    const observation = store.steps(first.rootId as string)[0]?.observations[0]?.content ?? '';
    expect(observation).toContain('was ended: before the crash this program');
    expect(observation).toContain('took another path');
    expect(store.questions({ status: 'open' })).toEqual([]);
    const refusal = store.events(first.rootId as string).find((event) => event.type === 'refusal');
    expect(refusal).toMatchObject({ tool: 'read_file', rule: 'codeact.diverged' });
  });

  it('is held to its time limit, and ends with everything it started', async () => {
    const root = twelveFiles();
    const contract = TaskContract.workspace('wait', root).withCodeAct({ timeoutSecs: 1 });
    const source =
      language === 'python'
        ? 'import subprocess, time\nsubprocess.Popen(["sleep", "600"])\nprint("waiting", flush=True)\ntime.sleep(600)\nprint("WOKE")\n'
        : "require('node:child_process').spawn('sleep', ['600'], { stdio: 'ignore' });\nconsole.log('waiting');\nawait new Promise((resolve) => setTimeout(resolve, 600_000));\nconsole.log('WOKE');\n";
    const { result, observations } = await run(root, [program(language, source)], contract);
    expect(result.outcome.kind).toBe('finished');
    expect(observations[0]).toContain('was ended: it ran for 1 s, the most a program may');
    expect(observations[0]).toContain('waiting');
    expect(observations[0]).not.toContain('WOKE');
    expect(await noneLeftUnder(root)).toBe(true);
  });
});

describe('a host without the interpreter', () => {
  it('runs the turn on plain tool calls, offering no run_program, with the fallback in the trace', async () => {
    const root = twelveFiles();
    const contract = TaskContract.workspace('read one', root).withCodeAct({
      python: 'python3-not-installed',
      node: 'node-not-installed',
    });
    const { result, tools, events, observations } = await run(
      root,
      [{ toolCalls: [{ name: 'read_file', args: { path: 'notes/01.txt' } }] }],
      contract,
    );
    expect(result.outcome.kind).toBe('finished');
    expect(tools).not.toContain('run_program');
    expect(observations[0]).toContain('item 1 weighs 3');
    const fallbacks = events.filter((event) => event.type === 'codeact-fallback');
    expect(fallbacks).toMatchObject([
      { language: 'javascript', offered: 'plain tool calls' },
      { language: 'python', offered: 'plain tool calls' },
    ]);
    expect((fallbacks[1] as { reason: string }).reason).toContain(
      "no python3-not-installed in the system's directories",
    );
  });

  it('offers the languages it can run, and records the one it cannot', async () => {
    const root = twelveFiles();
    const contract = TaskContract.workspace('read one', root).withCodeAct({ python: 'python3-not-installed' });
    const { result, events, observations } = await run(
      root,
      [program('python', 'print(1)'), program('javascript', 'console.log(6 * 7)')],
      contract,
    );
    expect(result.outcome.kind).toBe('finished');
    expect(events.filter((event) => event.type === 'codeact-fallback')).toMatchObject([
      { language: 'python', offered: 'run_program in javascript' },
    ]);
    // A python program is refused by the tool's own schema, which offers javascript only.
    expect(observations[0]).toContain('use one of "javascript"');
    expect(observations[1]).toContain('42');
  });
});

describe('what a program may not call', () => {
  it('refuses a spawn from inside a program, naming the rule, and the options are checked', async () => {
    const root = twelveFiles();
    const viaName = await run(root, [
      program(
        'python',
        'try:\n    call_tool("spawn_agent", {"task": "x"})\nexcept Refused as error:\n    print("refused:", error.rule)\n',
      ),
    ]);
    expect(viaName.observations[0]).toContain('refused: codeact.not-in-programs');
    expect(() => TaskContract.workspace('x', root).withCodeAct({ languages: ['ruby' as never] })).toThrow(/languages/);
    expect(() => TaskContract.workspace('x', root).withCodeAct({ maxActs: 0 })).toThrow(/maxActs/);
    expect(() => TaskContract.workspace('x', root).withCodeAct({ python: 'bin/python3' })).toThrow(/absolute path/);
    // [codeact] in the user file sets the same; a workspace's io.toml may not (it names programs to run).
    const userFile = join(tempWorkspace(), 'io.toml');
    writeFileSync(userFile, '[codeact]\nlanguages = ["python"]\nmax_acts = 20\nmax_output_bytes = 4096\n');
    expect(Config.discover(root, { userFile }).contract('x').toJSON().codeact).toEqual({
      languages: ['python'],
      python: 'python3',
      node: 'node',
      maxActs: 20,
      maxOutputBytes: 4096,
      timeoutSecs: 120,
    });
  });

  it('asks again about an act a resumed program asks for in place of the one a person approved', async () => {
    const root = twelveFiles();
    writeFileSync(join(root, 'target.txt'), 'staging\n');
    const log = join(tempWorkspace(), 'deploys.log');
    // @ts-expect-error: a script of the tests', without declarations
    const { deployTools } = await import('./support/scripts/tools.mjs');
    const store = await openStore();
    const supervisor = await Supervisor.start(store, { tools: deployTools({ log }) });
    later(() => supervisor.close());
    const source = 'deploy(target=read_file("target.txt").strip())\nprint("deployed")\n';
    const { provider } = await serve(turns([program('python', source), { text: 'done' }]));
    const defer = new CallbackApprover(() => 'defer');
    const contract = TaskContract.workspace('deploy', root).withCodeAct();
    const policy = POLICY.askTool('deploy');
    const handle = supervisor.run({ contract, provider, policy, approver: defer });
    expect((await handle.result).status).toBe('paused');
    const [asked] = await store.questions({ status: 'open' });
    expect(JSON.stringify(asked?.payload)).toContain('staging');
    await answerQuestion(store, asked?.questionId as string, 'approve');
    // Before it runs again, what the program reads changes: its act is another one now.
    writeFileSync(join(root, 'target.txt'), 'prod\n');
    const again = await (await supervisor.resume(handle.rootId, { provider, approver: defer })).result;
    expect(again.status).toBe('paused');
    expect(existsSync(log)).toBe(false);
    const open = await store.questions({ status: 'open' });
    expect(open).toHaveLength(1);
    expect(JSON.stringify(open[0]?.payload)).toContain('prod');
    expect(open[0]?.questionId).not.toBe(asked?.questionId);
    await answerQuestion(store, open[0]?.questionId as string, 'approve');
    const last = await (await supervisor.resume(handle.rootId, { provider, approver: defer })).result;
    expect(last.status).toBe('finished');
    expect(readFileSync(log, 'utf8')).toBe('deploy prod\n');
  });

  it('keeps a program to the system and the workspace: no writable root, no shared cache, nothing else of the host', async () => {
    const rungs = hostRungs();
    if (!rungs.bubblewrap.ok) {
      console.log(
        `bubblewrap: ${rungs.bubblewrap.reason}; a program's start is asked about as a command instead, and this case is not run`,
      );
      return;
    }
    const root = twelveFiles();
    const writable = tempWorkspace();
    const elsewhere = tempWorkspace({ 'secret.txt': 'the host keeps this\n' });
    // The harness's own npm cache, which shared caches would let a command write.
    const cache = join(homedir(), '.npm', `io-harness-planted-${process.pid}`);
    later(() => rmSync(cache, { force: true }));
    const contract = TaskContract.workspace('look around', root)
      .withCodeAct()
      .withWritableRoots([writable])
      .withSandbox({ sharedCaches: true });
    const source = [
      'import os',
      `for target in [${JSON.stringify(join(writable, 'planted.txt'))}, ${JSON.stringify(cache)}]:`,
      '    try:',
      '        os.makedirs(os.path.dirname(target), exist_ok=True)',
      '        open(target, "w").write("x")',
      '        print("WROTE", target)',
      '    except OSError as error:',
      '        print("write stopped:", error.strerror)',
      'try:',
      `    print("READ", open(${JSON.stringify(join(elsewhere, 'secret.txt'))}).read())`,
      'except OSError as error:',
      '    print("read stopped:", error.strerror)',
      'print("workspace:", open("notes/01.txt").read().strip())',
    ].join('\n');
    const { observations } = await run(root, [program('python', source)], contract);
    expect(observations[0]).toContain('write stopped:');
    expect(observations[0]).not.toContain('WROTE');
    expect(observations[0]).toContain('read stopped: No such file or directory');
    expect(observations[0]).not.toContain('the host keeps this');
    expect(observations[0]).toContain('workspace: item 1 weighs 3');
    expect(existsSync(join(writable, 'planted.txt'))).toBe(false);
    expect(existsSync(cache)).toBe(false);
  });

  it('answers each of a program’s threads its own call', async () => {
    const root = twelveFiles();
    const source = [
      'from concurrent.futures import ThreadPoolExecutor',
      'names = ["notes/%02d.txt" % i for i in range(1, 13)]',
      'with ThreadPoolExecutor(max_workers=6) as pool:',
      '    texts = list(pool.map(read_file, names))',
      'print("matched", sum(1 for i, text in enumerate(texts) if text.strip() == "item %d weighs %d" % (i + 1, (i + 1) * 3)))',
    ].join('\n');
    const { observations } = await run(root, [program('python', source)]);
    expect(observations[0]).toContain('matched 12');
  });

  it('decides every start by the policy: run_program denied, no program runs', async () => {
    const root = twelveFiles();
    const store = await openStore();
    const { provider } = await serve(
      turns([program('python', 'print("RAN")'), program('python', 'print("RAN")'), { text: 'done' }]),
    );
    const denied = await runWith(
      TaskContract.workspace('print', root).withCodeAct(),
      provider,
      store,
      POLICY.layer('no-programs').denyTool('run_program'),
    );
    const observation = store.steps(denied.runId)[0]?.observations[0]?.content ?? '';
    expect(observation).toContain('deny-tool run_program');
    expect(observation).not.toContain('RAN');
    const allowed = await run(root, [program('python', 'print("RAN")')]);
    expect(allowed.observations[0]).toContain('RAN');
    expect(allowed.events.find((event) => event.type === 'policy-decision')).toMatchObject({
      act: 'tool',
      effect: 'allow',
    });
  });

  it('decides a program it cannot confine as the command it is: code an interpreter runs', async () => {
    const root = twelveFiles();
    // Full access: nothing contains the program, so starting it is asked about, and nobody is there to answer.
    const contract = TaskContract.workspace('print', root).withCodeAct().withFullAccess();
    const store = await openStore();
    const { provider } = await serve(turns([program('python', 'print("RAN")'), { text: 'done' }]));
    const result = await runWith(contract, provider, store, Policy.default());
    const observation = store.steps(result.runId)[0]?.observations[0]?.content ?? '';
    expect(observation).toContain('needs approval');
    expect(observation).toContain('<program>');
    expect(observation).not.toContain('RAN');
    const decided = store.events(result.runId).filter((event) => event.type === 'policy-decision');
    expect(decided.map((event) => (event as { rule: string }).rule)).toContain('exec.arbitrary-code');
  });

  it('ends a program that prints past its output cap', async () => {
    const root = twelveFiles();
    const contract = TaskContract.workspace('print', root).withCodeAct({ maxOutputBytes: 1000 });
    const source = 'print("x" * 5000)\nread_file("notes/01.txt")\nprint("AFTER")\n';
    const { observations, events } = await run(root, [program('python', source)], contract);
    expect(observations[0]).toContain('was ended: it printed more than 1000 bytes');
    expect(observations[0]).not.toContain('AFTER');
    expect(events.filter((event) => event.type === 'program-act')).toHaveLength(0);
  });
});
