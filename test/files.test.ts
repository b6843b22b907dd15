/**
 * The workspace file tools as pure operations, on real temporary directories: paths
 * cannot leave the root (by `..`, absolute paths or symbolic links), reads are exact or
 * refused (never empty, never shortened), a planned change touches nothing until it is
 * applied, a patch is applied whole or not at all, and a recorded diff reverses exactly.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { applyPatch, parsePatch } from 'diff';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkArguments } from '../dist/runtime/arguments.js';
import {
  describeChange,
  FILE_TOOL_DESCRIPTIONS,
  FILE_TOOL_PARAMETERS,
  type FileChange,
  reverseApply,
  unifiedDiff,
  Workspace,
} from '../dist/runtime/workspace/files.js';

let root: string;
let outside: string;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'io-harness-files-')));
  outside = realpathSync(mkdtempSync(join(tmpdir(), 'io-harness-outside-')));
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

function put(relative: string, content: string | Buffer, base = root): string {
  const path = join(base, relative);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  return path;
}

function text(relative: string, base = root): string {
  return readFileSync(join(base, relative), 'utf8');
}

/** Every path under a directory, to show that a refused call created nothing. */
function tree(base: string): string[] {
  return readdirSync(base, { recursive: true, encoding: 'utf8' }).sort();
}

function planned(result: ReturnType<Workspace['planWrite']>): FileChange {
  if (!result.ok) throw new Error(`expected a change, got: ${result.result.content}`);
  return result.change;
}

function notPlanned(result: ReturnType<Workspace['planWrite']>) {
  if (result.ok) throw new Error(`expected no change, got a diff of ${result.change.path}`);
  return result.result;
}

describe('the workspace root', () => {
  it('must exist, and the error names the path and what to pass', () => {
    const missing = join(root, 'nope');
    let caught: unknown;
    try {
      new Workspace({ root: missing });
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: 'WORKSPACE_NOT_FOUND' });
    expect((caught as Error).message).toContain(missing);
    expect((caught as Error).message).toContain('pass root');
  });

  it('must be a directory', () => {
    const file = put('a.txt', 'x');
    expect(() => new Workspace({ root: file })).toThrow(/is a file, not a directory/);
    expect(() => new Workspace({ root: file })).toThrow(expect.objectContaining({ code: 'WORKSPACE_NOT_FOUND' }));
  });

  it('is held as its realpath', () => {
    const link = join(outside, 'link-to-root');
    symlinkSync(root, link);
    const workspace = new Workspace({ root: link });
    expect(workspace.root).toBe(root);
    expect(workspace.file).toBeNull();
  });

  it('rejects bad ceilings', () => {
    expect(() => new Workspace({ root, maxReadBytes: 0 })).toThrow(/maxReadBytes/);
    expect(() => new Workspace({ root, maxResults: 1.5 })).toThrow(/maxResults/);
  });
});

describe('paths', () => {
  it('accepts relative and absolute paths inside the root and normalises them', () => {
    put('src/a.js', 'a');
    const workspace = new Workspace({ root });
    expect(workspace.resolve('src/a.js')).toEqual({ ok: true, absolute: join(root, 'src/a.js'), relative: 'src/a.js' });
    expect(workspace.resolve(join(root, 'src/a.js'))).toMatchObject({ ok: true, relative: 'src/a.js' });
    expect(workspace.resolve('./src/../src/./a.js')).toMatchObject({ ok: true, relative: 'src/a.js' });
    expect(workspace.resolve('src/new/deeper.js')).toMatchObject({ ok: true, relative: 'src/new/deeper.js' });
    expect(workspace.resolve('..foo')).toMatchObject({ ok: true, relative: '..foo' });
  });

  it('refuses ../ escapes, and changes nothing', () => {
    const workspace = new Workspace({ root });
    const name = `../${outside.split('/').pop()}/x.txt`;
    for (const result of [
      workspace.resolve('../x'),
      { ok: false, result: workspace.read({ path: '../x' }) },
      workspace.planWrite({ path: name, content: 'escaped' }),
      workspace.planWrite({ path: 'src/../../x', content: 'escaped' }),
    ]) {
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.result.isError).toBe(true);
      expect(result.result.refusal?.rule).toBe('workspace.boundary');
      expect(result.result.content).toMatch(/is outside the workspace/);
      expect(result.result.content).toMatch(/relative to the workspace root/);
    }
    expect(tree(outside)).toEqual([]);
    expect(tree(root)).toEqual([]);
  });

  it('refuses absolute paths outside the root', () => {
    put('secret.txt', 'secret', outside);
    const workspace = new Workspace({ root });
    const read = workspace.read({ path: join(outside, 'secret.txt') });
    expect(read.refusal?.rule).toBe('workspace.boundary');
    expect(read.content).not.toContain('secret\n');
    const write = notPlanned(workspace.planWrite({ path: join(outside, 'secret.txt'), content: 'changed' }));
    expect(write.refusal?.rule).toBe('workspace.boundary');
    expect(workspace.resolve('/etc/passwd')).toMatchObject({ ok: false });
    expect(text('secret.txt', outside)).toBe('secret');
  });

  it('refuses a symlink whose target is outside, for reading and writing', () => {
    put('secret.txt', 'secret', outside);
    symlinkSync(join(outside, 'secret.txt'), join(root, 'innocent.txt'));
    const workspace = new Workspace({ root });
    const read = workspace.read({ path: 'innocent.txt' });
    expect(read).toMatchObject({ isError: true, refusal: { rule: 'workspace.boundary' } });
    expect(read.content).toMatch(/symbolic link/);
    expect(notPlanned(workspace.planWrite({ path: 'innocent.txt', content: 'pwned' })).refusal?.rule).toBe(
      'workspace.boundary',
    );
    expect(
      notPlanned(workspace.planEdit({ path: 'innocent.txt', old_string: 'secret', new_string: 'pwned' })).refusal?.rule,
    ).toBe('workspace.boundary');
    expect(() =>
      workspace.apply({ path: 'innocent.txt', before: 'secret', after: 'pwned', diff: '' } satisfies FileChange),
    ).toThrow(/outside the workspace/);
    expect(text('secret.txt', outside)).toBe('secret');
  });

  it('refuses a path under a symlinked parent directory that leads outside, even for a new file', () => {
    symlinkSync(outside, join(root, 'vendor'));
    const workspace = new Workspace({ root });
    expect(workspace.resolve('vendor/new.txt')).toMatchObject({ ok: false });
    expect(notPlanned(workspace.planWrite({ path: 'vendor/deep/new.txt', content: 'escaped' })).refusal?.rule).toBe(
      'workspace.boundary',
    );
    expect(tree(outside)).toEqual([]);
  });

  it('refuses a dangling symlink that points outside', () => {
    symlinkSync(join(outside, 'not-yet.txt'), join(root, 'dangling.txt'));
    const workspace = new Workspace({ root });
    expect(notPlanned(workspace.planWrite({ path: 'dangling.txt', content: 'x' })).refusal?.rule).toBe(
      'workspace.boundary',
    );
    expect(existsSync(join(outside, 'not-yet.txt'))).toBe(false);
  });

  it('follows a symlink that stays inside, and writes the real file rather than replacing the link', () => {
    put('real/a.txt', 'one\n');
    symlinkSync(join(root, 'real'), join(root, 'alias'));
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'alias/a.txt' })).toEqual({ content: 'one\n', isError: false });
    const change = planned(workspace.planWrite({ path: 'alias/a.txt', content: 'two\n' }));
    expect(change.path).toBe('real/a.txt');
    workspace.apply(change);
    expect(text('real/a.txt')).toBe('two\n');
  });

  it('refuses the root itself as a file', () => {
    const workspace = new Workspace({ root });
    for (const path of ['.', root, 'src/..']) {
      const result = workspace.resolve(path);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.result.content).toMatch(/workspace root itself/);
    }
    expect(workspace.read({ path: '.' }).isError).toBe(true);
  });

  it('says an empty path is empty', () => {
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: '' })).toMatchObject({ isError: true, content: expect.stringMatching(/empty/) });
  });
});

describe('single-file mode', () => {
  it('lets the tools touch only the one file, and refuses grep and find', () => {
    put('src/a.js', 'a\n');
    put('src/b.js', 'b\n');
    const workspace = new Workspace({ root, file: 'src/a.js' });
    expect(workspace.file).toBe('src/a.js');
    expect(workspace.read({ path: 'src/a.js' })).toEqual({ content: 'a\n', isError: false });
    expect(workspace.read({ path: join(root, 'src/a.js') }).isError).toBe(false);
    const other = workspace.read({ path: 'src/b.js' });
    expect(other).toMatchObject({ isError: true, refusal: { rule: 'workspace.single-file' } });
    expect(other.content).toContain('src/a.js');
    expect(notPlanned(workspace.planWrite({ path: 'src/c.js', content: 'c' })).refusal?.rule).toBe(
      'workspace.single-file',
    );
    expect(workspace.grep({ pattern: 'a' }).refusal?.rule).toBe('workspace.single-file');
    expect(workspace.find({ pattern: '*' }).refusal?.rule).toBe('workspace.single-file');
    expect(workspace.read({ path: '../x' }).refusal?.rule).toBe('workspace.boundary');
    workspace.apply(planned(workspace.planEdit({ path: 'src/a.js', old_string: 'a', new_string: 'A' })));
    expect(text('src/a.js')).toBe('A\n');
    expect(existsSync(join(root, 'src/c.js'))).toBe(false);
  });

  it('may name a file that does not exist yet', () => {
    const workspace = new Workspace({ root, file: 'notes/new.md' });
    workspace.apply(planned(workspace.planWrite({ path: 'notes/new.md', content: '# notes\n' })));
    expect(text('notes/new.md')).toBe('# notes\n');
  });

  it('refuses a file outside the root or a directory at construction', () => {
    mkdirSync(join(root, 'dir'));
    expect(() => new Workspace({ root, file: '../x' })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => new Workspace({ root, file: 'dir' })).toThrow(/is a directory/);
  });
});

describe('read_file', () => {
  it('returns the exact bytes of a whole file: CRLF, a byte order mark, no final newline', () => {
    const content = '\uFEFFfirst\r\nsecond\r\nthird';
    put('w.txt', content);
    put('empty.txt', '');
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'w.txt' })).toEqual({ content, isError: false });
    expect(workspace.read({ path: 'empty.txt' })).toEqual({ content: '', isError: false });
  });

  it('returns a range of lines with a header, clamps an end past the file, and refuses a start past it', () => {
    put('n.txt', Array.from({ length: 340 }, (_, i) => `line ${i + 1}\n`).join(''));
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'n.txt', start_line: 10, end_line: 12 })).toEqual({
      content: 'lines 10-12 of 340:\nline 10\nline 11\nline 12\n',
      isError: false,
    });
    expect(workspace.read({ path: 'n.txt', start_line: 339 }).content).toBe(
      'lines 339-340 of 340:\nline 339\nline 340\n',
    );
    expect(workspace.read({ path: 'n.txt', end_line: 1 }).content).toBe('lines 1-1 of 340:\nline 1\n');
    const clamped = workspace.read({ path: 'n.txt', start_line: 338, end_line: 500 });
    expect(clamped.isError).toBe(false);
    expect(clamped.content).toBe(
      'lines 338-340 of 340 (end_line 500 is past the end: the file has 340 lines):\nline 338\nline 339\nline 340\n',
    );
    const past = workspace.read({ path: 'n.txt', start_line: 341 });
    expect(past.isError).toBe(true);
    expect(past.content).toMatch(/start_line 341 is past the end of n\.txt, which has 340 lines/);
    expect(workspace.read({ path: 'n.txt', start_line: 5, end_line: 4 }).isError).toBe(true);
  });

  it('keeps the line endings of a range exactly, and the last line without a newline', () => {
    put('crlf.txt', 'a\r\nb\r\nc');
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'crlf.txt', start_line: 2, end_line: 3 }).content).toBe('lines 2-3 of 3:\nb\r\nc');
    put('empty.txt', '');
    expect(workspace.read({ path: 'empty.txt', start_line: 1 }).content).toMatch(/has 0 lines \(it is empty\)/);
  });

  it('says a missing file is missing and a directory is a directory', () => {
    mkdirSync(join(root, 'src'));
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'src/nope.js' })).toEqual({
      content: 'there is no file at src/nope.js; use find to look for it.',
      isError: true,
    });
    const directory = workspace.read({ path: 'src' });
    expect(directory.isError).toBe(true);
    expect(directory.content).toMatch(/src is a directory/);
    expect(directory.content).toMatch(/find/);
  });

  it('refuses a binary file with a NUL byte, naming its size, never as an empty string', () => {
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04]);
    put('image.png', bytes);
    const workspace = new Workspace({ root });
    for (const args of [{ path: 'image.png' }, { path: 'image.png', start_line: 1, end_line: 1 }]) {
      const result = workspace.read(args);
      expect(result.isError).toBe(true);
      expect(result.content).not.toBe('');
      expect(result.content).toMatch(/binary/);
      expect(result.content).toContain('10 bytes');
      expect(result.refusal?.rule).toBe('read.binary');
    }
  });

  it('refuses a file that is not valid UTF-8 as binary', () => {
    put('latin1.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    const result = new Workspace({ root }).read({ path: 'latin1.txt' });
    expect(result).toMatchObject({ isError: true, refusal: { rule: 'read.binary' } });
    expect(result.content).toContain('5 bytes');
  });

  it('refuses a whole file above the ceiling, naming its size and the ceiling, and reads it in ranges', () => {
    const line = `${'x'.repeat(99)}\n`;
    put('big.txt', line.repeat(30));
    put('edge.txt', line.repeat(10));
    const workspace = new Workspace({ root, maxReadBytes: 1000 });
    const whole = workspace.read({ path: 'big.txt' });
    expect(whole.isError).toBe(true);
    expect(whole.refusal?.rule).toBe('read.ceiling');
    expect(whole.content).toContain('3000 bytes');
    expect(whole.content).toContain('1000 bytes');
    expect(whole.content).toMatch(/start_line and end_line/);
    expect(workspace.read({ path: 'edge.txt' })).toEqual({ content: line.repeat(10), isError: false });
    expect(workspace.read({ path: 'big.txt', start_line: 21, end_line: 30 })).toEqual({
      content: `lines 21-30 of 30:\n${line.repeat(10)}`,
      isError: false,
    });
    const tooMany = workspace.read({ path: 'big.txt', start_line: 1, end_line: 11 });
    expect(tooMany.refusal?.rule).toBe('read.ceiling');
    expect(tooMany.content).toContain('1100 bytes');
    expect(tooMany.content).toContain('1000 bytes');
  });

  it('defaults the ceiling to 262144 bytes', () => {
    put('big.txt', 'y'.repeat(262145));
    put('fits.txt', 'y'.repeat(262144));
    const workspace = new Workspace({ root });
    expect(workspace.read({ path: 'big.txt' }).content).toContain('262144');
    expect(workspace.read({ path: 'fits.txt' }).content).toHaveLength(262144);
  });
});

describe('write_file', () => {
  it('plans without writing, then applies, creating parent directories', () => {
    const workspace = new Workspace({ root });
    const change = planned(workspace.planWrite({ path: 'a/b/c.txt', content: 'one\ntwo\n' }));
    expect(change).toEqual({
      path: 'a/b/c.txt',
      before: null,
      after: 'one\ntwo\n',
      diff: unifiedDiff('a/b/c.txt', null, 'one\ntwo\n'),
    });
    expect(change.diff.startsWith('--- /dev/null\n+++ b/a/b/c.txt\n')).toBe(true);
    expect(existsSync(join(root, 'a'))).toBe(false);
    workspace.apply(change);
    expect(text('a/b/c.txt')).toBe('one\ntwo\n');
    expect(describeChange(change)).toBe('created a/b/c.txt (+2)');
    expect(tree(root)).toEqual(['a', 'a/b', 'a/b/c.txt']);
  });

  it('replaces a file, keeping its mode, and says so when nothing would change', () => {
    put('run.sh', 'echo one\n');
    chmodSync(join(root, 'run.sh'), 0o755);
    const workspace = new Workspace({ root });
    const change = planned(workspace.planWrite({ path: 'run.sh', content: 'echo two\n' }));
    expect(change.before).toBe('echo one\n');
    expect(change.diff).toContain('--- a/run.sh\n+++ b/run.sh\n');
    workspace.apply(change);
    expect(text('run.sh')).toBe('echo two\n');
    expect(statSync(join(root, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(describeChange(change)).toBe('wrote run.sh (+1 -1)');
    const same = notPlanned(workspace.planWrite({ path: 'run.sh', content: 'echo two\n' }));
    expect(same.isError).toBe(false);
    expect(same.content).toMatch(/nothing changed/);
    expect(readdirSync(root)).toEqual(['run.sh']);
  });

  it('refuses to overwrite a binary file, a directory, or write beneath a file', () => {
    put('blob.bin', Buffer.from([1, 0, 2]));
    put('plain.txt', 'x');
    mkdirSync(join(root, 'dir'));
    const workspace = new Workspace({ root });
    const binary = notPlanned(workspace.planWrite({ path: 'blob.bin', content: 'text' }));
    expect(binary).toMatchObject({ isError: true, refusal: { rule: 'write.binary' } });
    expect(binary.content).toContain('3 bytes');
    expect(notPlanned(workspace.planWrite({ path: 'dir', content: 'x' })).content).toMatch(/is a directory/);
    expect(notPlanned(workspace.planWrite({ path: 'plain.txt/child', content: 'x' })).content).toMatch(
      /plain\.txt is a file, not a directory/,
    );
    expect(readFileSync(join(root, 'blob.bin'))).toEqual(Buffer.from([1, 0, 2]));
  });

  it('applies a deletion and leaves no temporary files behind', () => {
    put('gone.txt', 'a\nb\n');
    const workspace = new Workspace({ root });
    const change: FileChange = {
      path: 'gone.txt',
      before: 'a\nb\n',
      after: null,
      diff: unifiedDiff('gone.txt', 'a\nb\n', null),
    };
    expect(describeChange(change)).toBe('deleted gone.txt (-2)');
    workspace.apply(change);
    expect(existsSync(join(root, 'gone.txt'))).toBe(false);
    workspace.apply(planned(workspace.planWrite({ path: 'x.txt', content: 'x' })));
    expect(readdirSync(root)).toEqual(['x.txt']);
  });
});

describe('edit_file', () => {
  it('replaces the one occurrence, literally', () => {
    put('a.js', 'const a = 1;\nconst b = 2;\n');
    const workspace = new Workspace({ root });
    const change = planned(workspace.planEdit({ path: 'a.js', old_string: 'b = 2', new_string: 'b = "$&$1"' }));
    expect(change.after).toBe('const a = 1;\nconst b = "$&$1";\n');
    expect(readFileSync(join(root, 'a.js'), 'utf8')).toBe('const a = 1;\nconst b = 2;\n');
    workspace.apply(change);
    expect(text('a.js')).toBe('const a = 1;\nconst b = "$&$1";\n');
    expect(describeChange(change)).toBe('wrote a.js (+1 -1)');
  });

  it('refuses old_string that does not occur, quoting a short prefix and suggesting read_file', () => {
    put('a.js', 'const a = 1;\n');
    const workspace = new Workspace({ root });
    const long = `const z = 26; ${'and then some more text '.repeat(10)}`;
    const result = notPlanned(workspace.planEdit({ path: 'a.js', old_string: long, new_string: '' }));
    expect(result.isError).toBe(true);
    expect(result.content).toContain('"const z = 26;');
    expect(result.content).not.toContain(long);
    expect(result.content).toMatch(/read_file/);
  });

  it('refuses old_string that occurs more than once, naming the count', () => {
    put('a.js', 'x = 1;\nx = 1;\nx = 1;\n');
    const workspace = new Workspace({ root });
    const result = notPlanned(workspace.planEdit({ path: 'a.js', old_string: 'x = 1;', new_string: 'y = 2;' }));
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/occurs 3 times/);
    expect(result.content).toMatch(/more of the surrounding lines/);
    put('b.js', 'aaa');
    expect(notPlanned(workspace.planEdit({ path: 'b.js', old_string: 'aa', new_string: 'b' })).content).toMatch(
      /occurs 2 times/,
    );
    expect(text('a.js')).toBe('x = 1;\nx = 1;\nx = 1;\n');
  });

  it('refuses an empty old_string and a missing file', () => {
    put('a.js', 'a');
    const workspace = new Workspace({ root });
    expect(notPlanned(workspace.planEdit({ path: 'a.js', old_string: '', new_string: 'b' })).content).toMatch(
      /old_string is empty/,
    );
    const missing = notPlanned(workspace.planEdit({ path: 'nope.js', old_string: 'a', new_string: 'b' }));
    expect(missing.isError).toBe(true);
    expect(missing.content).toMatch(/no file at nope\.js/);
    expect(existsSync(join(root, 'nope.js'))).toBe(false);
  });

  it('keeps CRLF line endings, matching an LF old_string against them', () => {
    put('w.txt', 'one\r\ntwo\r\nthree\r\n');
    const workspace = new Workspace({ root });
    const change = planned(workspace.planEdit({ path: 'w.txt', old_string: 'one\ntwo', new_string: 'one\n2' }));
    expect(change.after).toBe('one\r\n2\r\nthree\r\n');
    const exact = planned(workspace.planEdit({ path: 'w.txt', old_string: 'two\r\n', new_string: 'zwei\r\n' }));
    expect(exact.after).toBe('one\r\nzwei\r\nthree\r\n');
  });

  it('says when the edit changes nothing', () => {
    put('a.js', 'a');
    const result = notPlanned(new Workspace({ root }).planEdit({ path: 'a.js', old_string: 'a', new_string: 'a' }));
    expect(result).toMatchObject({ isError: false });
  });
});

describe('patch_file', () => {
  const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`);
  const source = `${lines.join('\n')}\n`;
  const good = [
    '--- a/src/f.txt',
    '+++ b/src/f.txt',
    '@@ -2,3 +2,3 @@',
    ' line 2',
    '-line 3',
    '+LINE 3',
    ' line 4',
    '@@ -14,3 +14,3 @@ a section heading',
    ' line 14',
    '-line 15',
    '+LINE 15',
    ' line 16',
    '@@ -26,3 +26,4 @@',
    ' line 26',
    '-line 27',
    '+LINE 27',
    '+line 27.5',
    ' line 28',
    '',
  ];

  it('applies every hunk', () => {
    put('src/f.txt', source);
    const workspace = new Workspace({ root });
    const change = planned(workspace.planPatch({ path: 'src/f.txt', patch: good.join('\n') }));
    expect(change.after).toBe(
      source
        .replace('line 3\n', 'LINE 3\n')
        .replace('line 15\n', 'LINE 15\n')
        .replace('line 27\n', 'LINE 27\nline 27.5\n'),
    );
    expect(describeChange(change)).toBe('wrote src/f.txt (+4 -3)');
    expect(text('src/f.txt')).toBe(source);
    workspace.apply(change);
    expect(text('src/f.txt')).toBe(change.after);
  });

  it('applies nothing when one hunk of three does not fit, and names hunk 2 and its header', () => {
    put('src/f.txt', source);
    const bad = good.map((line) => (line === '-line 15' ? '-line fifteen' : line));
    const workspace = new Workspace({ root });
    const result = notPlanned(workspace.planPatch({ path: 'src/f.txt', patch: bad.join('\n') }));
    expect(result.isError).toBe(true);
    expect(result.content).toContain('hunk 2 of 3');
    expect(result.content).toContain('@@ -14,3 +14,3 @@ a section heading');
    expect(result.content).toContain('"line fifteen", is not in the file');
    expect(result.content).toMatch(/Nothing was written/);
    expect(text('src/f.txt')).toBe(source);
    expect(tree(root)).toEqual(['src', 'src/f.txt']);
  });

  it('names the hunk when its lines exist but not in that order', () => {
    put('src/f.txt', source);
    const bad = good.map((line) => (line === ' line 28' ? ' line 2' : line));
    const result = notPlanned(new Workspace({ root }).planPatch({ path: 'src/f.txt', patch: bad.join('\n') }));
    expect(result.content).toContain('hunk 3 of 3 (@@ -26,3 +26,4 @@)');
    expect(result.content).toMatch(/not together in this order/);
  });

  it('accepts bare hunks without headers, and hunks whose line counts are wrong', () => {
    put('f.txt', source);
    const workspace = new Workspace({ root });
    const bare = planned(
      workspace.planPatch({ path: 'f.txt', patch: '@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n' }),
    );
    expect(bare.after).toBe(source.replace('line 3\n', 'LINE 3\n'));
    const miscounted = planned(
      workspace.planPatch({ path: 'f.txt', patch: '@@ -2,7 +2,1 @@\n line 2\n-line 3\n+LINE 3\n line 4\n' }),
    );
    expect(miscounted.after).toBe(bare.after);
  });

  it('refuses a header naming another file, and text that is not a diff', () => {
    put('f.txt', source);
    const workspace = new Workspace({ root });
    const other = notPlanned(
      workspace.planPatch({ path: 'f.txt', patch: '--- a/g.txt\n+++ b/g.txt\n@@ -2 +2 @@\n-line 2\n+LINE 2\n' }),
    );
    expect(other.content).toMatch(/header names "a\/g\.txt" but path is "f\.txt"/);
    expect(notPlanned(workspace.planPatch({ path: 'f.txt', patch: 'please change line 2' })).content).toMatch(
      /no hunks/,
    );
    expect(notPlanned(workspace.planPatch({ path: 'f.txt', patch: '@@ -1,1 +1,1 @@\n?? what\n' })).content).toMatch(
      /not a unified diff/,
    );
    expect(notPlanned(workspace.planPatch({ path: 'f.txt', patch: '@@ -1,1 +1,1 @@\n' })).content).toMatch(
      /not a unified diff|hunk 1 is empty/,
    );
    expect(text('f.txt')).toBe(source);
  });

  it('creates a file from a /dev/null patch, and refuses one for a file that exists', () => {
    const workspace = new Workspace({ root });
    const patch = '--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1,2 @@\n+# New\n+text\n';
    const change = planned(workspace.planPatch({ path: 'docs/new.md', patch }));
    expect(change).toMatchObject({ path: 'docs/new.md', before: null, after: '# New\ntext\n' });
    workspace.apply(change);
    expect(text('docs/new.md')).toBe('# New\ntext\n');
    expect(notPlanned(workspace.planPatch({ path: 'docs/new.md', patch })).content).toMatch(/already exists/);
    expect(notPlanned(workspace.planPatch({ path: 'nope.txt', patch: '@@ -1 +1 @@\n-a\n+b\n' })).content).toMatch(
      /no file at nope\.txt/,
    );
  });

  it('deletes a file with a +++ /dev/null patch', () => {
    put('old.txt', 'a\nb\n');
    const workspace = new Workspace({ root });
    const change = planned(
      workspace.planPatch({ path: 'old.txt', patch: '--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n' }),
    );
    expect(change.after).toBeNull();
    workspace.apply(change);
    expect(existsSync(join(root, 'old.txt'))).toBe(false);
  });

  it('keeps a CRLF file CRLF under an LF patch', () => {
    put('w.txt', 'a\r\nb\r\nc\r\n');
    const change = planned(
      new Workspace({ root }).planPatch({ path: 'w.txt', patch: '@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n' }),
    );
    expect(change.after).toBe('a\r\nB\r\nc\r\n');
  });
});

describe('unified diffs', () => {
  const cases: [string, string | null, string | null][] = [
    ['edit', 'a\nb\nc\n', 'a\nB\nc\n'],
    ['create', null, 'one\ntwo\n'],
    ['delete', 'one\ntwo\n', null],
    ['create empty', null, ''],
    ['delete empty', '', null],
    ['empty to text', '', 'x\n'],
    ['text to empty', 'x\n', ''],
    ['no final newline', 'a\nb', 'a\nb\nc'],
    ['add final newline', 'a\nb', 'a\nb\n'],
    ['remove final newline', 'a\nb\n', 'a\nb'],
    ['crlf', 'a\r\nb\r\nc\r\n', 'a\r\nB\r\nc\r\n'],
    ['mixed endings', 'a\r\nb\nc\r\n', 'a\nb\r\nc\r\nd'],
    [
      'many hunks',
      Array.from({ length: 50 }, (_, i) => `l${i}\n`).join(''),
      Array.from({ length: 50 }, (_, i) => (i % 10 === 3 ? `changed ${i}\n` : `l${i}\n`)).join(''),
    ],
  ];

  it.each(cases)('%s: the diff turns before into after, and reverses back', (_, before, after) => {
    const diff = unifiedDiff('src/x.txt', before, after);
    expect(diff.split('\n')[0]).toBe(before === null ? '--- /dev/null' : '--- a/src/x.txt');
    expect(diff.split('\n')[1]).toBe(after === null ? '+++ /dev/null' : '+++ b/src/x.txt');
    const patch = parsePatch(diff)[0]!;
    expect(applyPatch(before ?? '', patch, { autoConvertLineEndings: false })).toBe(after ?? '');
    expect(reverseApply(diff, after)).toEqual({ ok: true, content: before });
  });

  it('refuses to reverse a change the file has moved on from, naming the hunk', () => {
    const before = Array.from({ length: 20 }, (_, i) => `l${i}\n`).join('');
    const after = before.replace('l2\n', 'two\n').replace('l15\n', 'fifteen\n');
    const diff = unifiedDiff('x.txt', before, after);
    const moved = after.replace('fifteen\n', 'FIFTEEN\n');
    const result = reverseApply(diff, moved);
    expect(result).toMatchObject({ ok: false, hunk: 2 });
    const headers = diff.split('\n').filter((line) => line.startsWith('@@'));
    expect(headers).toHaveLength(2);
    if (!result.ok) {
      expect(result.header).toBe(headers[1]);
      expect(result.reason).toContain('"fifteen"');
    }
    expect(reverseApply(diff, null)).toMatchObject({ ok: false, hunk: 0 });
  });

  it('refuses to reverse a creation whose file is gone or has grown, and a deletion whose file is back', () => {
    const created = unifiedDiff('x.txt', null, 'a\n');
    expect(reverseApply(created, null)).toMatchObject({
      ok: false,
      hunk: 0,
      reason: expect.stringMatching(/no longer exists/),
    });
    expect(reverseApply(created, 'a\nb\n')).toMatchObject({ ok: false, hunk: 1, header: '@@ -0,0 +1,1 @@' });
    const deleted = unifiedDiff('x.txt', 'a\n', null);
    expect(reverseApply(deleted, 'a\n')).toMatchObject({
      ok: false,
      hunk: 0,
      reason: expect.stringMatching(/exists again/),
    });
  });

  it('round-trips through the workspace: plan, apply, reverse, apply', () => {
    put('src/a.js', 'let a = 1;\nlet b = 2;\n');
    const workspace = new Workspace({ root });
    const change = planned(workspace.planEdit({ path: 'src/a.js', old_string: 'let b', new_string: 'const b' }));
    workspace.apply(change);
    const undone = reverseApply(change.diff, text('src/a.js'));
    expect(undone).toEqual({ ok: true, content: 'let a = 1;\nlet b = 2;\n' });
    if (undone.ok) workspace.apply({ ...change, before: change.after, after: undone.content });
    expect(text('src/a.js')).toBe('let a = 1;\nlet b = 2;\n');
  });
});

describe('grep', () => {
  it('prints path:line:text with paths sorted, skipping .git, node_modules, binary and oversized files', () => {
    put('b.js', 'needle\nhay\nneedle again\n');
    put('a/z.js', 'hay\nneedle\n');
    put('a-b.js', 'needle\n');
    put('.git/config', 'needle\n');
    put('node_modules/m/index.js', 'needle\n');
    put('src/node_modules/deep.js', 'needle\n');
    put('bin.dat', Buffer.from('needle\0needle'));
    put('huge.txt', `needle\n${'x'.repeat(2000)}\n`);
    put('.hidden/h.txt', 'needle\n');
    const workspace = new Workspace({ root, maxReadBytes: 1000 });
    const result = workspace.grep({ pattern: 'needle' });
    expect(result).toEqual({
      content: [
        '.hidden/h.txt:1:needle',
        'a-b.js:1:needle',
        'a/z.js:2:needle',
        'b.js:1:needle',
        'b.js:3:needle again',
      ].join('\n'),
      isError: false,
    });
  });

  it('filters by glob, searches under a path, ignores case, and strips CR', () => {
    put('src/a.ts', 'Needle\r\n');
    put('src/deep/b.ts', 'needle\n');
    put('src/c.js', 'needle\n');
    put('test/d.ts', 'needle\n');
    const workspace = new Workspace({ root });
    expect(workspace.grep({ pattern: 'needle', glob: '*.ts' }).content).toBe(
      'src/deep/b.ts:1:needle\ntest/d.ts:1:needle',
    );
    expect(workspace.grep({ pattern: 'needle', glob: '*.ts', ignore_case: true }).content).toBe(
      'src/a.ts:1:Needle\nsrc/deep/b.ts:1:needle\ntest/d.ts:1:needle',
    );
    expect(workspace.grep({ pattern: 'needle', path: 'src', glob: 'src/**/*.js' }).content).toBe('src/c.js:1:needle');
    expect(workspace.grep({ pattern: 'needle', path: 'src/c.js' }).content).toBe('src/c.js:1:needle');
    expect(workspace.grep({ pattern: '^needle$', path: 'test' }).content).toBe('test/d.ts:1:needle');
  });

  it('cuts long lines and bounds the output, saying how many matches there were', () => {
    put('long.txt', `${'a'.repeat(500)}\n`);
    put('many.txt', 'hit\n'.repeat(7));
    const workspace = new Workspace({ root, maxResults: 5 });
    const long = workspace.grep({ pattern: 'a+', path: 'long.txt' }).content;
    expect(long.startsWith(`long.txt:1:${'a'.repeat(300)} … [line cut at 300 of 500 characters]`)).toBe(true);
    const many = workspace.grep({ pattern: 'hit' });
    const lines = many.content.split('\n');
    expect(lines).toHaveLength(6);
    expect(lines.slice(0, 5)).toEqual([
      'many.txt:1:hit',
      'many.txt:2:hit',
      'many.txt:3:hit',
      'many.txt:4:hit',
      'many.txt:5:hit',
    ]);
    expect(lines[5]).toMatch(/output cut: showing the first 5 of 7 matching lines/);
  });

  it('says when nothing matches, and names an invalid pattern', () => {
    put('a.txt', 'hay\n');
    const workspace = new Workspace({ root });
    expect(workspace.grep({ pattern: 'needle' })).toMatchObject({
      isError: false,
      content: expect.stringMatching(/^no matches/),
    });
    const invalid = workspace.grep({ pattern: 'a(' });
    expect(invalid.isError).toBe(true);
    expect(invalid.content).toMatch(/not a valid JavaScript regular expression/);
    expect(workspace.grep({ pattern: 'x', path: '../' }).refusal?.rule).toBe('workspace.boundary');
  });

  it('does not follow a symlinked directory out of the root', () => {
    put('secret.txt', 'needle\n', outside);
    put('inside/a.txt', 'needle\n');
    symlinkSync(outside, join(root, 'escape'));
    symlinkSync(join(root, 'inside'), join(root, 'alias'));
    symlinkSync(root, join(root, 'inside/loop'));
    const workspace = new Workspace({ root });
    // Each directory is searched once, under its own name when it has one: the alias adds nothing.
    expect(workspace.grep({ pattern: 'needle' }).content).toBe('inside/a.txt:1:needle');
    expect(workspace.find({ pattern: '**' }).content).toBe('alias/\ninside/\ninside/a.txt\ninside/loop/');
    rmSync(join(root, 'inside'), { recursive: true });
    put('only/a.txt', 'needle\n', outside);
    symlinkSync(join(outside, 'only'), join(root, 'inside'));
    expect(workspace.grep({ pattern: 'needle' }).content).toMatch(/^no matches/);
  });
});

describe('find', () => {
  it('lists matches sorted, directories with a trailing slash, matching basenames for a bare pattern', () => {
    put('src/a.ts', '');
    put('src/lib/b.ts', '');
    put('src/lib/c.js', '');
    put('README.md', '');
    put('.github/workflows/ci.yml', '');
    const workspace = new Workspace({ root });
    expect(workspace.find({ pattern: '*.ts' }).content).toBe('src/a.ts\nsrc/lib/b.ts');
    expect(workspace.find({ pattern: 'lib' }).content).toBe('src/lib/');
    expect(workspace.find({ pattern: 'src/*' }).content).toBe('src/a.ts\nsrc/lib/');
    expect(workspace.find({ pattern: '**' }).content).toBe(
      [
        '.github/',
        '.github/workflows/',
        '.github/workflows/ci.yml',
        'README.md',
        'src/',
        'src/a.ts',
        'src/lib/',
        'src/lib/b.ts',
        'src/lib/c.js',
      ].join('\n'),
    );
    expect(workspace.find({ pattern: '*', path: 'src/lib' }).content).toBe('src/lib/b.ts\nsrc/lib/c.js');
    expect(workspace.find({ pattern: '*.py' })).toEqual({
      content: 'no paths match *.py under the workspace.',
      isError: false,
    });
  });

  it('skips .git and node_modules unless the pattern names them', () => {
    put('.git/HEAD', '');
    put('node_modules/pkg/index.js', '');
    put('index.js', '');
    const workspace = new Workspace({ root });
    expect(workspace.find({ pattern: '*.js' }).content).toBe('index.js');
    expect(workspace.find({ pattern: 'HEAD' }).content).toMatch(/^no paths match/);
    expect(workspace.find({ pattern: 'node_modules/**/*.js' }).content).toBe('node_modules/pkg/index.js');
    expect(workspace.find({ pattern: '.git/*' }).content).toBe('.git/HEAD');
  });

  it('bounds the output and says how many there were', () => {
    for (let i = 0; i < 12; i++) put(`f${String(i).padStart(2, '0')}.txt`, '');
    const result = new Workspace({ root, maxResults: 10 }).find({ pattern: '*.txt' });
    const lines = result.content.split('\n');
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe('f00.txt');
    expect(lines[9]).toBe('f09.txt');
    expect(lines[10]).toMatch(/output cut: showing the first 10 of 12 paths/);
  });

  it('does not descend into a symlink that leads out of the root', () => {
    put('secret.txt', '', outside);
    put('mine.txt', '');
    symlinkSync(outside, join(root, 'escape'));
    const workspace = new Workspace({ root });
    expect(workspace.find({ pattern: '**' }).content).toBe('mine.txt');
    expect(workspace.find({ pattern: '*', path: 'escape' }).refusal?.rule).toBe('workspace.boundary');
  });
});

describe('tool definitions', () => {
  it('describe every tool, with schemas that accept good arguments and reject bad ones', () => {
    const names = ['read_file', 'write_file', 'edit_file', 'patch_file', 'grep', 'find'] as const;
    expect(Object.keys(FILE_TOOL_PARAMETERS).sort()).toEqual([...names].sort());
    for (const name of names) {
      expect(FILE_TOOL_DESCRIPTIONS[name].length).toBeGreaterThan(40);
      expect(FILE_TOOL_PARAMETERS[name].additionalProperties).toBe(false);
    }
    expect(checkArguments(FILE_TOOL_PARAMETERS.read_file, { path: 'a', start_line: 1, end_line: 5 })).toEqual([]);
    expect(checkArguments(FILE_TOOL_PARAMETERS.read_file, { path: 'a', start_line: 0 })).not.toEqual([]);
    expect(checkArguments(FILE_TOOL_PARAMETERS.edit_file, { path: 'a', old_string: '', new_string: '' })).not.toEqual(
      [],
    );
    expect(checkArguments(FILE_TOOL_PARAMETERS.write_file, { path: 'a', content: '' })).toEqual([]);
    expect(checkArguments(FILE_TOOL_PARAMETERS.patch_file, { path: 'a' })).not.toEqual([]);
    expect(checkArguments(FILE_TOOL_PARAMETERS.grep, { pattern: 'x', ignore_case: true, glob: '*.ts' })).toEqual([]);
    expect(checkArguments(FILE_TOOL_PARAMETERS.find, { pattern: '*', extra: 1 })).not.toEqual([]);
  });
});
