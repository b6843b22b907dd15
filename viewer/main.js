// The trace viewer's page: the trees in a store, one tree's agents live, one run's steps.
// Read-only: it reads /api and follows /api/events (server-sent events) to refresh what is
// on screen. Routes are in the hash: #/ (trees), #/tree/<rootId>, #/run/<runId>.
import { html } from 'htm/preact';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Timeline } from './timeline.js';

async function getJson(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${(await response.json()).error ?? ''}`);
  return response.json();
}

/** The view the server painted first, and the data it painted it from (src/viewer/first-paint.ts). */
const firstPaint = JSON.parse(document.getElementById('first-paint')?.textContent ?? 'null');
// A view opened at its own path (/<token>/tree/<id>) goes on at the page's base with the same
// view in its hash, so the page's links (#/run/<id>) change the hash rather than reload it.
if (firstPaint && firstPaint.kind !== 'trees' && !location.hash)
  history.replaceState(null, '', `${document.baseURI}#/${firstPaint.kind}/${encodeURIComponent(firstPaint.id)}`);

/** Reads `path`, and again (at most every 200 ms) whenever the event stream says something changed. */
function useLive(path, stream, relevant = () => true) {
  // What the server painted is where a view of the same path starts: no "Loading…" in between.
  const [data, setData] = useState(firstPaint?.api === path ? firstPaint.data : null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let closed = false;
    let timer = null;
    const load = () =>
      getJson(path)
        .then((value) => {
          if (closed) return;
          setData(value);
          setError(null);
        })
        .catch((failure) => {
          if (!closed) setError(failure.message);
        });
    load();
    const source = stream ? new EventSource(stream) : null;
    if (source)
      source.onmessage = (message) => {
        if (!relevant(JSON.parse(message.data)) || timer) return;
        timer = setTimeout(() => {
          timer = null;
          load();
        }, 200);
      };
    return () => {
      closed = true;
      source?.close();
      if (timer) clearTimeout(timer);
    };
  }, [path, stream]);
  return { data, error };
}

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  // A hash route (#/tree/<id>) wins; without one, the path's (/<token>/tree/<id>), as the server painted it.
  if (!hash.replace(/^#\/?/, '') && firstPaint) return { kind: firstPaint.kind, id: firstPaint.id };
  const [, kind, id] = (hash.replace(/^#/, '') || '/').split('/');
  return { kind: kind || 'trees', id: id ? decodeURIComponent(id) : null };
}

const Status = ({ status }) => html`<span class=${`status ${status}`} data-status=${status}>${status}</span>`;

const when = (at) => (at ? new Date(at).toLocaleTimeString() : '');
const took = (run) => (run.endedAt ? `${((run.endedAt - run.createdAt) / 1000).toFixed(1)} s` : 'going');

function Spend({ spent, ceilings }) {
  const limit = ceilings?.steps ?? null;
  const share = limit ? Math.min(1, spent.steps / limit) : 0;
  return html`<span title=${limit ? `${spent.steps} of ${limit} steps` : `${spent.steps} steps`}>
    ${limit ? html`<span class="bar"><span style=${`width:${Math.round(share * 100)}%`}></span></span> ` : ''}
    ${spent.steps}${limit ? `/${limit}` : ''} steps · ${spent.tokens} tokens
  </span>`;
}

/** What a run with agents below it spent with them, beside its own (as the server's first paint writes it). */
function Subtree({ run }) {
  const below = run.subtree;
  if (!below || (below.steps === run.spent.steps && below.tokens === run.spent.tokens)) return null;
  return html` <span class="muted" data-subtree>(with the agents below: ${below.steps} steps · ${below.tokens} tokens)</span>`;
}

function Trees() {
  const { data, error } = useLive(
    'api/trees',
    'api/events',
    (event) => event.type === 'run-start' || event.type === 'run-end',
  );
  if (error) return html`<p class="refusal">${error}</p>`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  return html`<h2>Trees <span class="muted">(${data.total})</span></h2>
    <table data-trees>
      <thead><tr><th>tree</th><th>status</th><th>agents</th><th>spent</th><th>started</th><th>task</th></tr></thead>
      <tbody>
        ${data.trees.map(
          (tree) => html`<tr data-tree=${tree.runId}>
            <td><a href=${`#/tree/${tree.runId}`}>${tree.runId.slice(0, 8)}</a></td>
            <td><${Status} status=${tree.status} /></td>
            <td>${tree.runs}</td>
            <td><${Spend} spent=${tree.spent} ceilings=${tree.ceilings} /></td>
            <td>${when(tree.createdAt)}</td>
            <td>${tree.task}</td>
          </tr>`,
        )}
      </tbody>
    </table>`;
}

function Tree({ rootId }) {
  const { data, error } = useLive(
    `api/tree/${encodeURIComponent(rootId)}`,
    `api/events?root=${encodeURIComponent(rootId)}`,
  );
  if (error) return html`<p class="refusal">${error}</p>`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  const queued = data.queue.filter((item) => item.state === 'queued' || item.state === 'pending');
  const byId = new Map(data.runs.map((run) => [run.runId, run]));
  return html`<h2>Tree ${rootId.slice(0, 8)} <${Status} status=${data.root.status} />
      ${data.live ? html` <span class="live" data-live>● live</span>` : ''}
      <a class="muted" href=${`#/timeline/${rootId}`} data-timeline-link>timeline</a></h2>
    <p class="muted">${data.root.task}</p>
    <p>Ledger: <${Spend} spent=${data.ledger?.root.spent ?? data.root.spent} ceilings=${data.ledger?.root.ceilings} />
      ${data.ledger?.maxConcurrentAgents ? ` · at most ${data.ledger.maxConcurrentAgents} at once` : ''}
      ${data.ledger?.maxTotalAgents ? ` · at most ${data.ledger.maxTotalAgents} in all` : ''}</p>
    <h2>Agents <span class="muted" data-agent-count>(${data.runs.length})</span></h2>
    <table data-agents>
      <thead><tr><th>agent</th><th>status</th><th>spent</th><th>took</th><th>task</th></tr></thead>
      <tbody>
        ${data.runs.map(
          (run) => html`<tr data-run=${run.runId} data-run-status=${run.status}>
            <td style=${`padding-left:${0.5 + run.depth * 1.2}rem`}><a href=${`#/run/${run.runId}`}>${run.address}</a></td>
            <td><${Status} status=${run.status} /></td>
            <td><${Spend} spent=${run.spent} ceilings=${run.ceilings} /><${Subtree} run=${run} /></td>
            <td>${took(run)}</td>
            <td>${run.task}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    <h2>Queued children <span class="muted">(${queued.length})</span></h2>
    ${
      queued.length === 0
        ? html`<p class="muted">None waiting.</p>`
        : html`<ul data-queue>${queued.map((item) => html`<li>${byId.get(item.childRunId)?.address ?? item.childRunId} (${item.state}), from ${byId.get(item.parentId)?.address ?? item.parentId}</li>`)}</ul>`
    }
    <h2>Mailbox <span class="muted">(${data.messages.length})</span></h2>
    ${
      data.messages.length === 0
        ? html`<p class="muted">No messages.</p>`
        : html`<table data-mailbox>
            <thead><tr><th>from</th><th>to</th><th>read</th><th>message</th></tr></thead>
            <tbody>${data.messages.map((message) => html`<tr><td>${message.from}</td><td>${message.to}</td><td>${message.read ? 'read' : 'waiting'}</td><td class="call">${message.body}</td></tr>`)}</tbody>
          </table>`
    }`;
}

/** A tree over time (./timeline.js), live while it runs: its data read again as its agents start, step and end. */
function TreeTimeline({ rootId }) {
  const { data, error } = useLive(
    `api/tree/${encodeURIComponent(rootId)}/timeline`,
    `api/events?root=${encodeURIComponent(rootId)}`,
  );
  if (error) return html`<p class="refusal">${error}</p>`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  const live = data.runs.some((run) => run.ended === null && run.status !== 'paused');
  return html`<h2><a href=${`#/tree/${rootId}`}>Tree ${rootId.slice(0, 8)}</a> over time
      ${live ? html` <span class="live" data-live>● live</span>` : ''}</h2>
    <${Timeline} data=${data} />`;
}

function Diff({ patch }) {
  return html`<pre class="diff" data-diff>${patch.split('\n').map((line) => {
    const kind =
      line.startsWith('+') && !line.startsWith('+++')
        ? 'add'
        : line.startsWith('-') && !line.startsWith('---')
          ? 'del'
          : '';
    return html`<span class=${kind}>${`${line}\n`}</span>`;
  })}</pre>`;
}

function Run({ runId }) {
  const [rootId, setRootId] = useState(null);
  const { data, error } = useLive(
    `api/run/${encodeURIComponent(runId)}`,
    rootId ? `api/events?root=${encodeURIComponent(rootId)}` : null,
    (event) => event.runId === runId,
  );
  useEffect(() => {
    if (data && data.run.rootId !== rootId) setRootId(data.run.rootId);
  }, [data]);
  if (error) return html`<p class="refusal">${error}</p>`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  const { run } = data;
  const bySeq = new Map();
  for (const event of data.events) bySeq.set(event.seq, [...(bySeq.get(event.seq) ?? []), event]);
  const calls = new Map();
  for (const call of data.modelCalls) calls.set(call.seq, [...(calls.get(call.seq) ?? []), call]);
  const gates = data.events.filter((event) => event.type === 'gate-evaluated' || event.type === 'gate-output');
  return html`<h2><a href=${`#/tree/${run.rootId}`}>tree</a> / ${run.address} <${Status} status=${run.status} /></h2>
    <p class="muted">${run.task}</p>
    <p><${Spend} spent=${run.spent} ceilings=${run.ceilings} /> · ${took(run)}${run.reason ? ` · ${run.reason}` : ''}</p>
    <h2>Steps <span class="muted">(${data.steps.length})</span></h2>
    ${data.steps.map(
      (step) => html`<div class="step" data-step=${step.seq}>
        <div><strong>step ${step.seq}</strong> <span class="muted">${step.model}</span>
          ${(calls.get(step.seq) ?? []).map(
            (call) =>
              html` <span class="muted" data-model-call>· ${call.inputTokens} in, ${call.outputTokens} out${call.cacheReadTokens ? `, ${call.cacheReadTokens} cached` : ''}${call.latencyMs === null ? '' : `, ${Math.round(call.latencyMs)} ms`}${call.ttftMs === null ? '' : ` (first token ${Math.round(call.ttftMs)} ms)`}${call.outcome === 'ok' ? '' : ` · ${call.outcome}`}</span>`,
          )}</div>
        ${step.text ? html`<p>${step.text}</p>` : ''}
        ${step.toolCalls.map((call) => {
          const seen = step.observations.find((item) => item.callId === call.id);
          return html`<div class="call" data-tool-call=${call.name}>→ ${call.name} ${call.args}
            ${seen ? html`<div class=${seen.isError ? 'muted refusal-text' : 'muted'}>${seen.isError ? '✗' : '←'} ${seen.content}</div>` : ''}</div>`;
        })}
        ${(bySeq.get(step.seq) ?? [])
          .filter((event) => event.type === 'refusal')
          .map(
            (event) =>
              html`<div class="refusal" data-refusal>refused ${event.tool}: rule ${event.rule}, layer ${event.layer} — ${event.reason}</div>`,
          )}
      </div>`,
    )}
    ${
      gates.length > 0
        ? html`<h2>Gate</h2>${gates.map((event) =>
            event.type === 'gate-evaluated'
              ? html`<div class=${`gate ${event.verdict === 'passed' ? '' : 'failed'}`} data-gate=${event.verdict}>${event.criterion}: ${event.verdict}${event.exitStatus === null ? '' : ` (exit ${event.exitStatus})`} ${event.reasons.join('; ')}</div>`
              : html`<pre class="diff" data-gate-output>${event.stdout}${event.stderr}</pre>`,
          )}`
        : ''
    }
    ${run.reply ? html`<h2>Reply</h2><p data-reply>${run.reply}</p>` : ''}
    ${data.patch.trim() ? html`<h2>Diff</h2><${Diff} patch=${data.patch} />` : ''}`;
}

function App() {
  const route = useRoute();
  return html`<header><a href="#/">io-harness</a><span class="muted">trace viewer · read-only</span></header>
    <main>
      ${route.kind === 'timeline' && route.id ? html`<${TreeTimeline} rootId=${route.id} />` : route.kind === 'tree' && route.id ? html`<${Tree} rootId=${route.id} />` : route.kind === 'run' && route.id ? html`<${Run} runId=${route.id} />` : html`<${Trees} />`}
    </main>`;
}

// The server's first paint is replaced by the same view, made here from the same data.
const app = document.getElementById('app');
app.textContent = '';
render(html`<${App} />`, app);
