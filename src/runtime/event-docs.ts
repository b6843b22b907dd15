/**
 * What each event type says, a line each: the list in docs/guides/events.md is written from
 * this (`node scripts/docs-lists.mjs --write`), and a test compares the two. Keyed by every
 * event type, so a new type that is not described here fails to compile. Not loaded by the
 * agents' threads: only the docs script and the CLI read it.
 */
import type { EventType } from './events.js';

export const EVENT_DOCS = {
  'run-start': 'A run began, or was resumed (`resumed`): its task, address and parent.',
  'run-end': 'A run ended: its status, its reply, and the reason when it did not finish.',
  'step-end':
    'A step was committed: the tools it called, its tokens (cache reads and their share), provider and model.',
  'tool-call':
    'A tool was called: its call id, name and arguments (`invalid` when they could not be used, `failed` when the tool threw).',
  refusal: 'A call was refused: the tool, the rule and the layer that refused it, and why.',
  'program-act':
    "An act of a program (`run_program`): its call id, the program's call, the tool and arguments, and whether it failed.",
  'codeact-fallback':
    'A language `withCodeAct` asks for has no usable interpreter on this host: why, and what the run is offered instead.',
  spend: "A step's draw against the ledger, and what the whole tree has spent since.",
  'budget-clamped': "A child's budget was cut down to what its ancestors have left: each clamp.",
  'budget-exhausted': 'A draw would cross a ceiling: the draw, whose ceiling, the account, spent and limit.',
  'spawn-queued': 'A child was stored and waits for admission: its id, address and task.',
  'spawn-started': 'A queued child was admitted and its actor started.',
  'spawn-refused': 'A spawn was refused (a cap, the depth, the policy): the rule and why.',
  'message-sent': "A message was put in another agent's mailbox, in the step that sent it.",
  'message-read': 'Messages were consumed from the mailbox, in the step that read them.',
  'lease-taken': "A run's lease was taken (at start, on resume, or over a dead owner): owner, pid, generation.",
  'lease-lost': "A run's lease was taken over by another owner; delivered to observers, never stored by the loser.",
  'cancel-asked':
    'A cancel of the tree was asked for, from any host, and why: every host driving a run of it cancels what it drives.',
  'changes-accepted':
    'A resume or join went on, told to (`acceptChanges`), although the tree had changed under it: each change, and the release now.',
  'model-retry': 'A model call failed in a way worth retrying, and is tried again after `delayMs`.',
  'model-fallback': "A provider failed and the spec's next fallback answers from here on (`to`).",
  'model-failed': 'A model call failed for good: the provider, the kind of failure, status and message.',
  'provider-unreachable': 'The provider could not be reached at all (DNS, refused, TLS).',
  'model-escalated': "The run's gate failed often enough that a stronger model answers from here on.",
  steered: "A person's correction reached the root before a step (`before`), and who sent it.",
  'tools-expanded': 'A tool tier was opened by `expand_tools`: its tools are offered from the next step.',
  'context-window': "The window the run's requests are fitted to, where that figure came from, and the share used.",
  assembled: 'A request was rebuilt to fit the window: the rung that ran and the tokens before and after.',
  'memory-block': 'The memory block the run carries, found at its start: the notes in it and its text.',
  'prefix-broke': 'A request did not extend the one before it (system block, tools or transcript changed).',
  'bundle-problem': 'A bundle of the configuration was dropped, or one of its contributions refused.',
  'cache-miss': 'A request read less from the vendor’s cache than the one before it: a cached prefix paid again.',
  'file-changed': 'A tool changed a file in the workspace: the path and the lines added and removed.',
  'toolchain-checked': "The detected toolchain's check ran after a change (or was skipped by the policy): its exit.",
  'process-containment': "How the run's commands are kept from outliving it: a pid namespace, or a process group.",
  'cap-reached': 'A command was stopped by one of the sandbox caps: which cap, and its limit.',
  contained: "How the run's commands are contained: the rung, what it enforces, and what this host lacked.",
  'gate-evaluated': "The run's gate was evaluated: the criterion, the verdict, the exit status and the reasons.",
  'gate-output': 'What a failing command gate printed (both streams, bounded) and how it exited.',
  'schema-invalid': 'A final answer did not meet the output schema: the errors, and whether the run was asked again.',
  'run-paused': 'A run parked on a question for a person (an approval, a question, a plan): its id and summary.',
  'question-answered': 'A parked question was answered: the answer and who gave it.',
  'plan-submitted': 'The agent submitted its plan to the plan gate: the steps.',
  'plan-decided': 'The plan was approved, corrected or cancelled: the steps that stand and the note.',
  'intent-started': 'An act with effects outside the store (an `acts` tool, a command) was journaled before it ran.',
  'intent-finished': 'A journaled act finished: its outcome.',
  'step-rolled-back': 'A step interrupted by a crash was re-run: the files it had written were put back first.',
  'policy-decision':
    'The policy decided an act: allow, deny or ask, by which rule and layer, and the answer to an ask.',
} as const satisfies Record<EventType, string>;
