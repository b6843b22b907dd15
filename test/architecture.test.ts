/**
 * The shape of the house, held by a test: rooms small enough to read at once, no import
 * cycle, src/runtime/ (what an agent does) free of the actors, the supervisor and the
 * store's machinery, and executors made in src/runtime/exec/ alone. A file or function
 * that must stay large is listed, with its reason, in docs/ARCHITECTURE.md ("Rooms kept
 * large"); a listed one that is no longer large must leave the list.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const SRC = join(ROOT, 'src');
const DIST = join(ROOT, 'dist');
const MAX_FILE_LINES = 800;
const MAX_FUNCTION_LINES = 120;

function files(dir: string, extension: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path, extension);
    return entry.name.endsWith(extension) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const where = (path: string) => relative(ROOT, path).split('\\').join('/');

/** The exceptions docs/ARCHITECTURE.md lists: `src/a.ts` (a file) or `src/a.ts:name` (a function), each with a reason. */
function listedExceptions(): Map<string, string> {
  const text = readFileSync(join(ROOT, 'docs', 'ARCHITECTURE.md'), 'utf8');
  const section = /^## Rooms kept large\n([\s\S]*?)(?=^## )/m.exec(text)?.[1] ?? '';
  const listed = new Map<string, string>();
  for (const row of section.matchAll(/^\| `([^`]+)`\s*\|([^|]+)\|/gm)) {
    listed.set(row[1] as string, (row[2] as string).trim());
  }
  return listed;
}

/** Every function-like body in a source file longer than the limit: `path:name` and its length. */
function longFunctions(path: string): { key: string; lines: number }[] {
  const text = readFileSync(path, 'utf8');
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: { key: string; lines: number }[] = [];
  const nameOf = (node: ts.FunctionLikeDeclaration): string => {
    if (node.name) return node.name.getText(source);
    const parent = node.parent;
    if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
      return parent.name.getText(source);
    if (ts.isConstructorDeclaration(node)) return 'constructor';
    return '<anonymous>';
  };
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > MAX_FUNCTION_LINES)
        found.push({ key: `${where(path)}:${nameOf(node as ts.FunctionLikeDeclaration)}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The modules each compiled module loads when it is loaded: static imports and re-exports (types are gone by then). */
function runtimeImports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const pattern =
    /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s*['"](\.[^'"]+)['"]|(?:^|\n)\s*import\s*['"](\.[^'"]+)['"]/g;
  for (const file of files(DIST, '.js')) {
    const text = readFileSync(file, 'utf8');
    graph.set(
      file,
      [...text.matchAll(pattern)].map((match) => resolve(dirname(file), (match[1] ?? match[2]) as string)),
    );
  }
  return graph;
}

/** The cycles of a graph: its strongly connected components with more than one module, or one that loads itself. */
function cycles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (node: string) => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        connect(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, index.get(next) as number));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || graph.get(node)?.includes(node)) found.push(component.map(where).sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) connect(node);
  return found;
}

describe('the architecture', () => {
  it('keeps every file under 800 lines and every function under 120, but those listed with a reason', () => {
    const listed = listedExceptions();
    const sources = files(SRC, '.ts');
    expect(sources.length).toBeGreaterThan(100);
    const over: string[] = [];
    const stillLarge = new Set<string>();
    for (const path of sources) {
      const lines = readFileSync(path, 'utf8').split('\n').length;
      if (lines > MAX_FILE_LINES) {
        stillLarge.add(where(path));
        if (!listed.has(where(path))) over.push(`${where(path)}: ${lines} lines`);
      }
      for (const { key, lines: length } of longFunctions(path)) {
        stillLarge.add(key);
        if (!listed.has(key)) over.push(`${key}: ${length} lines`);
      }
    }
    expect(over, 'split these, or list them with the reason in docs/ARCHITECTURE.md ("Rooms kept large")').toEqual([]);
    for (const [key, reason] of listed) expect(reason.length, `${key} is listed without a reason`).toBeGreaterThan(10);
    expect(
      [...listed.keys()].filter((key) => !stillLarge.has(key)),
      'no longer large: take them off the list',
    ).toEqual([]);
  });

  it('measures what it holds: a long function, a long method and a long arrow are each seen by name', () => {
    const dir = mkdtempSync(join(tmpdir(), 'io-harness-architecture-'));
    try {
      const body = 'x();\n'.repeat(MAX_FUNCTION_LINES);
      const probe = join(dir, 'probe.ts');
      writeFileSync(
        probe,
        `function plain() {\n${body}}\nclass Room {\n  method() {\n${body}  }\n}\nconst arrow = () => {\n${body}};\nfunction short() {}\n`,
      );
      expect(longFunctions(probe).map(({ key }) => key.split(':')[1])).toEqual(['plain', 'method', 'arrow']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has no import cycle among the modules the package loads', () => {
    const graph = runtimeImports();
    expect(graph.size).toBeGreaterThan(100);
    // The walk follows imports: the supervisor loads the store client, which loads the thread protocol.
    const supervisor = graph.get(join(DIST, 'supervisor', 'supervisor.js')) ?? [];
    expect(supervisor.length).toBeGreaterThan(5);
    expect(cycles(graph)).toEqual([]);
    // And finds one where there is one.
    const probe = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(probe).map((cycle) => cycle.length)).toEqual([3]);
  });

  it('keeps src/runtime/ to what an agent does: nothing from the actors or the supervisor, only types from the store', () => {
    const runtime = files(join(SRC, 'runtime'), '.ts');
    expect(runtime.length).toBeGreaterThan(50);
    const found: string[] = [];
    for (const path of runtime) {
      const text = readFileSync(path, 'utf8');
      const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
      for (const statement of source.statements) {
        const specifier =
          (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier
            ? (statement.moduleSpecifier as ts.StringLiteral).text
            : null;
        if (!specifier?.startsWith('.')) continue;
        const target = relative(SRC, resolve(dirname(path), specifier))
          .split('\\')
          .join('/');
        const room = target.split('/')[0];
        if (room === 'actors' || room === 'supervisor') found.push(`${where(path)} imports ${target}`);
        if (room === 'store' && !typeOnly(statement)) found.push(`${where(path)} imports values from ${target}`);
      }
      // A dynamic import is an import too.
      for (const match of text.matchAll(/\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g)) {
        const target = relative(SRC, resolve(dirname(path), match[1] as string))
          .split('\\')
          .join('/');
        if (/^(actors|supervisor|store)\//.test(target)) found.push(`${where(path)} loads ${target}`);
      }
    }
    expect(found).toEqual([]);
  });

  it('makes executors in src/runtime/exec/ alone', () => {
    const found: string[] = [];
    for (const path of files(SRC, '.ts')) {
      const at = relative(SRC, path).split('\\').join('/');
      if (at.startsWith('runtime/exec/')) continue;
      const text = readFileSync(path, 'utf8');
      for (const pattern of [
        /\bnew\s+\w*Executor\s*\(/,
        /\bimplements\s+(?:\w+\s*,\s*)*Executor\b/,
        /:\s*Executor\s*=\s*\{/,
        /\bsatisfies\s+Executor\b/,
        /\bas\s+Executor\b/,
      ]) {
        if (pattern.test(text)) found.push(`${at}: ${pattern.source}`);
      }
    }
    expect(found).toEqual([]);
  });
});

function typeOnly(statement: ts.Statement): boolean {
  if (ts.isImportDeclaration(statement)) {
    const clause = statement.importClause;
    if (!clause) return false; // a side-effect import loads the module
    if (clause.isTypeOnly) return true;
    if (clause.name) return false;
    const bindings = clause.namedBindings;
    return !!bindings && ts.isNamedImports(bindings) && bindings.elements.every((element) => element.isTypeOnly);
  }
  if (ts.isExportDeclaration(statement)) {
    if (statement.isTypeOnly) return true;
    const clause = statement.exportClause;
    return !!clause && ts.isNamedExports(clause) && clause.elements.every((element) => element.isTypeOnly);
  }
  return false;
}
