/**
 * The viewer's first paint, made on the server: the view the page's path names (the trees,
 * one tree's agents, one run's heading), as plain HTML in the page, and the data it was
 * made from, which the page's script starts from instead of asking for it again. A
 * screenshot taken the moment the page loads shows the tree, not "Loading…"; the script
 * then takes the view over and keeps it live. The markup is the script's (viewer/main.js),
 * in its classes and data attributes (less the agents' indentation by depth, an inline
 * style the page's policy keeps from HTML), so the hand-over changes next to nothing.
 */

/** A view as the server found it: its kind, the id it names, the API path its data is read from, and the data. */
export interface FirstView {
  kind: 'trees' | 'tree' | 'run' | 'timeline';
  id: string | null;
  api: string;
  data: unknown;
}

interface Spent {
  steps: number;
  tokens: number;
}

interface Summary {
  runId: string;
  parentId: string | null;
  address: string;
  depth: number;
  status: string;
  task: string;
  spent: Spent;
  ceilings: { steps?: number | null } | null;
  subtree?: Spent;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escaped = (text: unknown): string => String(text ?? '').replace(/[&<>"']/g, (char) => ESCAPES[char] as string);

function status(value: string): string {
  return `<span class="status ${escaped(value)}" data-status="${escaped(value)}">${escaped(value)}</span>`;
}

function spend(spent: Spent, ceilings: Summary['ceilings']): string {
  const limit = ceilings?.steps ?? null;
  return `<span>${spent.steps}${limit ? `/${limit}` : ''} steps · ${spent.tokens} tokens</span>`;
}

function treesView(data: { total: number; trees: (Summary & { runs: number })[] }): string {
  const rows = data.trees
    .map(
      (tree) =>
        `<tr data-tree="${escaped(tree.runId)}"><td><a href="#/tree/${escaped(tree.runId)}">${escaped(tree.runId.slice(0, 8))}</a></td><td>${status(tree.status)}</td><td>${tree.runs}</td><td>${spend(tree.spent, tree.ceilings)}</td><td></td><td>${escaped(tree.task)}</td></tr>`,
    )
    .join('');
  return `<h2>Trees <span class="muted">(${data.total})</span></h2><table data-trees><thead><tr><th>tree</th><th>status</th><th>agents</th><th>spent</th><th>started</th><th>task</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function treeView(id: string, data: { root: Summary; runs: (Summary & { subtree: Spent })[] }): string {
  const rows = data.runs
    .map(
      (run) =>
        `<tr data-run="${escaped(run.runId)}" data-run-status="${escaped(run.status)}"><td data-depth="${run.depth}"><a href="#/run/${escaped(run.runId)}">${escaped(run.address)}</a></td><td>${status(run.status)}</td><td>${spend(run.spent, run.ceilings)}${subtreeNote(run)}</td><td></td><td>${escaped(run.task)}</td></tr>`,
    )
    .join('');
  return `<h2>Tree ${escaped(id.slice(0, 8))} ${status(data.root.status)}</h2><p class="muted">${escaped(data.root.task)}</p><h2>Agents <span class="muted" data-agent-count>(${data.runs.length})</span></h2><table data-agents><thead><tr><th>agent</th><th>status</th><th>spent</th><th>took</th><th>task</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** What a run with agents below it spent with them, beside its own. */
export function subtreeNote(run: { spent: Spent; subtree?: Spent }): string {
  const below = run.subtree;
  if (!below || (below.steps === run.spent.steps && below.tokens === run.spent.tokens)) return '';
  return ` <span class="muted" data-subtree>(with the agents below: ${below.steps} steps · ${below.tokens} tokens)</span>`;
}

/** The HTML of a view, or a line saying what is not there. */
export function firstPaintHtml(view: FirstView): string {
  if (view.data === null) return `<p class="refusal">no ${view.kind} ${escaped(view.id)}</p>`;
  if (view.kind === 'trees') return treesView(view.data as Parameters<typeof treesView>[0]);
  if (view.kind === 'tree') return treeView(view.id as string, view.data as Parameters<typeof treeView>[1]);
  if (view.kind === 'timeline') {
    const { runs } = view.data as { runs: unknown[] };
    return `<h2>Tree ${escaped((view.id as string).slice(0, 8))} over time</h2><p class="muted">${runs.length} agents</p>`;
  }
  const { run } = view.data as { run: Summary };
  return `<h2>${escaped(run.address)} ${status(run.status)}</h2><p class="muted">${escaped(run.task)}</p>`;
}

/**
 * The page with the view painted into it and its data beside it, for the script to start
 * from; `base` is where its own files and API are (`/<token>/`), so a page opened at a
 * deeper path (`/<token>/tree/<id>`) finds them.
 */
export function withFirstPaint(page: string, view: FirstView, base: string): string {
  // In a script element `<` would end it early: written as its JSON escape.
  const data = JSON.stringify(view).replace(/</g, '\\u003c');
  const header = '<header><a href="#/">io-harness</a><span class="muted">trace viewer · read-only</span></header>';
  // Replaced by functions: a `$&` or `$'` in a task or a reply is text, not a replacement pattern.
  const painted = `<div id="app">${header}<main>${firstPaintHtml(view)}</main></div><script type="application/json" id="first-paint">${data}</script>`;
  return page
    .replace('<head>', () => `<head>\n    <base href="${escaped(base)}" />`)
    .replace('<div id="app"></div>', () => painted);
}
