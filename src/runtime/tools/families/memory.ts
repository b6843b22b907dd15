/**
 * Durable memory's tools, offered to a run whose contract has `withMemory()` (family
 * `memory`): `remember` keeps a note in the workspace's memory, `recall` finds notes by the
 * words asked for and the run's own, `forget` drops a wrong one. A run never writes the
 * global scope and never overwrites or forgets a pinned note (the operator's correction);
 * what it recalls is recorded as drawn on, as its block's notes are at its start. The
 * rules are in runtime/context/memory.ts; the store keeps the notes.
 */
import type { ArgumentSchema } from '../../arguments.js';
import {
  DEFAULT_MEMORY_CAP,
  GLOBAL_SCOPE,
  keyProblem,
  MAX_KEY_CHARS,
  MAX_NOTE_CHARS,
  NOTE_KINDS,
  type NoteKind,
  type NoteRecord,
  noteLine,
  rankNotes,
  runTerms,
  visibleNotes,
  wordsOf,
  workspaceScope,
} from '../../context/memory.js';
import type { AgentCall, RunContext } from '../context.js';
import type { Tool, ToolResult } from '../tool.js';

/** The most notes one recall returns, and the most characters. */
const RECALLED = 20;
const RECALLED_CHARS = 12_000;

const rememberParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    key: {
      type: 'string',
      description:
        'A short name for the note, of letters, digits and _ . : / - (such as "test-command"); a note under the same key is replaced.',
      minLength: 1,
      maxLength: MAX_KEY_CHARS,
    },
    text: {
      type: 'string',
      description: 'The fact or decision, in a sentence or two.',
      minLength: 1,
      maxLength: MAX_NOTE_CHARS,
    },
    kind: { type: 'string', description: '"fact" (the default) or "decision".', maxLength: 16 },
  },
  required: ['key', 'text'],
  additionalProperties: false,
};

const recallParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'Words of what you want to know; leave it out for the notes most drawn on.',
      maxLength: 1_000,
    },
  },
  additionalProperties: false,
};

const forgetParameters: ArgumentSchema = {
  type: 'object',
  properties: {
    key: { type: 'string', description: 'The key of the note to drop.', minLength: 1, maxLength: MAX_KEY_CHARS },
  },
  required: ['key'],
  additionalProperties: false,
};

/** The workspace a run's notes belong to, and its cap. */
function scopeOf(agent: RunContext): { root: string; cap: number } {
  return {
    root: workspaceScope(agent.contract?.root ?? '/'),
    cap: agent.contract?.memory?.cap ?? DEFAULT_MEMORY_CAP,
  };
}

const error = (content: string): ToolResult => ({ content, isError: true });
/** A problem as the model reads it: a sentence. */
const sentence = (problem: string) => `${problem[0]?.toUpperCase()}${problem.slice(1)}.`;

export const REMEMBER: Tool<AgentCall> = {
  name: 'remember',
  description:
    'Keep a fact or a decision about this workspace for later runs, under a key. Keep it short and true; a later run reads it as given.',
  parameters: rememberParameters,
  kind: 'acts',
  family: 'memory',
  execute: async (args, call) => {
    const kind = (args.kind ?? 'fact') as NoteKind;
    if (!NOTE_KINDS.includes(kind)) return error(`kind is "fact" or "decision", got ${JSON.stringify(args.kind)}.`);
    const { root, cap } = scopeOf(call.agent);
    const key = String(args.key).trim();
    const problem = keyProblem(key);
    if (problem) return error(sentence(problem));
    const result = await call.agent.store.call('remember', {
      scope: root,
      key,
      kind,
      text: String(args.text).trim(),
      by: call.agent.fence,
      cap,
      now: call.agent.clock.now(),
    });
    if (result.status === 'pinned')
      return error(
        `The note "${key}" is pinned: it is a correction the operator made, and no run may overwrite it. It says: ${result.note.text} If what you found differs, keep it under another key.`,
      );
    if (result.status === 'full')
      return error(
        `The workspace's memory holds ${cap} notes and every one is pinned, so nothing was kept; tell the operator.`,
      );
    const parts = [`${result.replaced ? 'Replaced' : 'Kept'} the ${kind} "${key}".`];
    if (result.restates)
      parts.push(
        `It restates the note "${result.restates}"; if they say the same, forget one of them so later runs read it once.`,
      );
    if (result.evicted)
      parts.push(
        `The memory was full (${cap} notes), so "${result.evicted.key}", the note the fewest runs had drawn on (${result.evicted.runs}), was dropped to make room.`,
      );
    return { content: parts.join(' '), isError: false };
  },
};

export const RECALL: Tool<AgentCall> = {
  name: 'recall',
  description:
    'Find notes kept from earlier runs (this workspace and the global ones), the best matches for your words first.',
  parameters: recallParameters,
  kind: 'reads',
  family: 'memory',
  execute: async (args, call) => {
    const { root } = scopeOf(call.agent);
    const notes = visibleNotes(await call.agent.store.notes([GLOBAL_SCOPE, root]));
    if (notes.length === 0) return { content: 'No notes are kept yet.', isError: false };
    const query = typeof args.query === 'string' ? args.query : '';
    // Without words asked for, the run's goal says what it is about.
    const terms = query.trim() === '' ? runTerms(call.agent.contract?.goal ?? '', []) : wordsOf(query);
    // The best twenty, as many of them as fit the result's bound.
    const found: NoteRecord[] = [];
    let chars = 0;
    for (const note of rankNotes(notes, terms).slice(0, RECALLED)) {
      chars += noteLine(note).length + 1;
      if (chars > RECALLED_CHARS && found.length > 0) break;
      found.push(note);
    }
    await call.agent.store.call('drawNotes', {
      by: call.agent.fence,
      noteIds: found.map((note) => note.id),
      how: 'recall',
      now: call.agent.clock.now(),
    });
    const more =
      notes.length > found.length ? `\n(${notes.length - found.length} more notes; ask with other words)` : '';
    return { content: `${found.map(noteLine).join('\n')}${more}`, isError: false };
  },
};

export const FORGET: Tool<AgentCall> = {
  name: 'forget',
  description: 'Drop a note of this workspace that is wrong or no longer true.',
  parameters: forgetParameters,
  kind: 'acts',
  family: 'memory',
  execute: async (args, call) => {
    const { root } = scopeOf(call.agent);
    const key = String(args.key).trim();
    const problem = keyProblem(key);
    if (problem) return error(sentence(problem));
    const result = await call.agent.store.call('forget', {
      scope: root,
      key,
      by: call.agent.fence,
      now: call.agent.clock.now(),
    });
    if (result.status === 'pinned')
      return error(`The note "${key}" is pinned, a correction the operator made: no run may forget it.`);
    if (result.status === 'absent') return error(`There is no note "${key}" in this workspace's memory.`);
    return { content: `Forgot "${key}".`, isError: false };
  },
};

export const MEMORY_TOOLS: readonly Tool<AgentCall>[] = [FORGET, RECALL, REMEMBER];
