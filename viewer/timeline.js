// A tree over time: one bar per agent from the moment it was asked for to its end, the
// queue before its start hatched, its pauses for a person shaded, its steps as ticks, its
// colour its status, its spend on hover; above, spend and agents at work over time. Only
// the rows in view are in the page (a thousand agents are a thousand rows of data, and a
// screenful of DOM), so it stays quick while a large tree grows live.
import { html } from 'htm/preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';

const ROW = 20;
const LABEL = 170;
const OVERSCAN = 10;

const pct = (at, span) => `${Math.max(0, Math.min(100, ((at - span.start) / span.width) * 100))}%`;

function Bar({ run, span, now }) {
  const end = run.ended ?? now;
  const admitted = run.admitted ?? end;
  const title = `${run.address}: ${run.status}, ${run.spent.steps} steps, ${run.spent.tokens} tokens${run.admitted === null ? ', queued' : ''}${run.ended ? `, took ${((run.ended - run.created) / 1000).toFixed(1)} s` : ''}`;
  const width = (from, to) => `${Math.max(0.15, ((to - from) / span.width) * 100)}%`;
  return html`<div class="tl-track" title=${title} data-bar=${run.id}>
    ${admitted > run.created ? html`<div class="tl-queued" style=${`left:${pct(run.created, span)};width:${width(run.created, admitted)}`}></div>` : ''}
    <div class=${`tl-bar ${run.status}`} data-bar-status=${run.status} style=${`left:${pct(admitted, span)};width:${width(admitted, end)}`}></div>
    ${run.pauses.map(([from, to]) => html`<div class="tl-paused" style=${`left:${pct(from, span)};width:${width(from, to ?? now)}`}></div>`)}
    ${run.steps.map((at) => html`<div class="tl-tick" style=${`left:${pct(at, span)}`}></div>`)}
  </div>`;
}

/** Spend (tokens, running total) and agents at work, over the tree's time, in a small chart. */
function Chart({ runs, span, now }) {
  const buckets = 120;
  const { active, tokens, most, total } = useMemo(() => {
    const active = new Array(buckets).fill(0);
    const drawn = new Array(buckets).fill(0);
    const at = (time) => Math.min(buckets - 1, Math.max(0, Math.floor(((time - span.start) / span.width) * buckets)));
    for (const run of runs) {
      if (run.admitted === null) continue;
      for (let index = at(run.admitted); index <= at(run.ended ?? now); index++) active[index]++;
      const each = run.steps.length > 0 ? run.spent.tokens / run.steps.length : 0;
      for (const step of run.steps) drawn[at(step)] += each;
    }
    let sum = 0;
    const tokens = drawn.map((value) => {
      sum += value;
      return sum;
    });
    return { active, tokens, most: Math.max(1, ...active), total: Math.max(1, sum) };
  }, [runs, span, now]);
  const line = (values, top) =>
    values.map((value, index) => `${((index + 0.5) / buckets) * 100},${40 - (value / top) * 36}`).join(' ');
  return html`<div class="tl-chart" data-chart>
    <svg viewBox="0 0 100 40" preserveAspectRatio="none" role="img" aria-label="agents at work and tokens spent over time">
      <polyline class="tl-active" points=${line(active, most)} vector-effect="non-scaling-stroke" />
      <polyline class="tl-spend" points=${line(tokens, total)} vector-effect="non-scaling-stroke" />
    </svg>
    <div class="muted"><span class="tl-key active"></span> agents at work (most ${most}) · <span class="tl-key spend"></span> tokens spent (${Math.round(total)} in all)</div>
  </div>`;
}

export function Timeline({ data }) {
  const scroller = useRef(null);
  const [view, setView] = useState({ top: 0, height: 600 });
  const [filter, setFilter] = useState('');
  useEffect(() => {
    const element = scroller.current;
    if (!element) return;
    const measure = () => setView({ top: element.scrollTop, height: element.clientHeight });
    measure();
    element.addEventListener('scroll', measure, { passive: true });
    addEventListener('resize', measure);
    return () => {
      element.removeEventListener('scroll', measure);
      removeEventListener('resize', measure);
    };
  }, [scroller.current]);
  const now = data.now;
  const end = Math.max(now, ...data.runs.map((run) => run.ended ?? now));
  const span = { start: data.start, width: Math.max(1, end - data.start) };
  const runs = filter ? data.runs.filter((run) => run.address.includes(filter) || run.status === filter) : data.runs;
  const first = Math.max(0, Math.floor(view.top / ROW) - OVERSCAN);
  const last = Math.min(runs.length, Math.ceil((view.top + view.height) / ROW) + OVERSCAN);
  const counts = new Map();
  for (const run of data.runs) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
  return html`<div class="timeline" data-timeline data-agents=${data.runs.length}>
    <${Chart} runs=${data.runs} span=${span} now=${now} />
    <p class="muted">${data.runs.length} agents: ${[...counts].map(([status, count]) => `${count} ${status}`).join(', ')} · ${((end - data.start) / 1000).toFixed(1)} s
      · <input data-timeline-filter placeholder="filter by address or status" value=${filter} onInput=${(event) => setFilter(event.target.value)} /></p>
    <div class="tl-scroll" ref=${scroller} data-timeline-scroll>
      <div class="tl-inner" style=${`height:${runs.length * ROW}px`}>
        ${runs.slice(first, last).map(
          (
            run,
            offset,
          ) => html`<div class="tl-row" key=${run.id} data-timeline-row=${run.address} style=${`top:${(first + offset) * ROW}px`}>
            <a class="tl-label" style=${`width:${LABEL}px;padding-left:${4 + Math.min(run.depth, 8) * 8}px`} href=${`#/run/${run.id}`}>${run.address}</a>
            <${Bar} run=${run} span=${span} now=${now} />
          </div>`,
        )}
      </div>
    </div>
  </div>`;
}
