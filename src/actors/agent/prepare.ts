/**
 * A run prepared for its steps, once per process that drives it: restored from the trace,
 * equipped (its policy, executor and workspace, its tools), its transcript rebuilt, its
 * provider loaded, its window found and its memory block chosen; the files a step a crash
 * interrupted had written put back. What a step needs of the run across steps is here, in
 * {@link PreparedRun}; what it needs of one step is the step's own (see ./run-step.ts).
 */

import { createHash } from 'node:crypto';
import { ErrorCode, HarnessError } from '../../errors.js';
import { rosterCatalogue } from '../../runtime/agents.js';
import { DEFAULT_SHARE } from '../../runtime/context/assembler.js';
import type { EventData } from '../../runtime/events.js';
import { withKept } from '../../runtime/exec/containment/kept.js';
import { Policy } from '../../runtime/policy/policy.js';
import {
  isHttpSpec,
  type Provider,
  type ProviderSpec,
  type RequestOptions,
  type TranscriptEntry,
} from '../../runtime/provider.js';
import { loadProvider } from '../../runtime/providers/registry.js';
import { ProviderError } from '../../runtime/providers/types.js';
import { skillCatalogue } from '../../runtime/skills.js';
import type { AgentCall } from '../../runtime/tools/context.js';
import { ToolTiers } from '../../runtime/tools/families/tiers.js';
import { registryFor, type ToolRegistry } from '../../runtime/tools/registry.js';
import { webRefusal } from '../../runtime/web/web.js';
import type { RunRecord, RunSpec } from '../../store/records.js';
import { Escalation } from './ask.js';
import { Assembly, findWindow } from './assembly.js';
import { Budget } from './budget.js';
import { changedIn, Freshness } from './freshness.js';
import { type Judged, shapeOnly } from './gates.js';
import { chooseMemory } from './memory-block.js';
import { defaultSystem, workspaceSystem } from './prompts.js';
import type { AgentRun } from './run.js';
import { type Ended, ended, endRun } from './stage.js';
import { type RestoredRun, restoreRun, type Spent, steerTurn } from './step.js';

/** What a workspace run loads (./workspace-kit.ts). */
type WorkspaceKit = typeof import('./workspace-kit.js');

/** The stored spec, as a run reads it: the provider is a spec. */
export type RunSpecData = RunSpec & { provider: ProviderSpec };

/** What the steps of a run share: prepared once, changed only by the stages. */
export interface PreparedRun {
  readonly agent: AgentRun;
  readonly restored: RestoredRun;
  readonly spec: RunSpecData;
  readonly providerSpec: ProviderSpec;
  readonly provider: Provider;
  readonly registry: ToolRegistry<AgentCall>;
  /** What the model has been shown: the session's earlier turns, the opening, the committed steps. */
  readonly transcript: TranscriptEntry[];
  /** Re-prompts spent, counted from the trace; the gates add to it. */
  readonly spent: Spent;
  readonly budget: Budget;
  readonly assembly: Assembly;
  /** The files the run has read whole, so one that changes after is read again for the model; null without a workspace. */
  readonly freshness: Freshness | null;
  /** What every request asks of the vendor: its cache key, and a root's answer shape. */
  readonly options: RequestOptions;
  readonly parentAddress: string | null;
  /** The contract whose gates and shape judge a final answer: the root's; children report to their parent. */
  readonly judge: Judged | null;
  /** The tools the contract withholds from the run. */
  readonly mask: ReadonlySet<string>;
  /** The run's tiers, when they keep something back. */
  readonly tiered: ToolTiers | null;
  /** A stronger model once the gate has failed often enough; null when the contract names none. */
  readonly escalation: Escalation | null;
  /** The step a pause kept, until the step it belongs to is acted on. */
  draft: RestoredRun['draft'];
  /** The window is checked to hold the head of a request once, at this process's first. */
  room: 'unchecked' | 'checked';
}

export type Prepared = { kind: 'prepared'; run: PreparedRun } | Ended;

/**
 * The address of the parent a child's reply goes to, read while the run opens rather than
 * after: its failure is thrown where it is waited for (a return before that leaves it unread).
 */
function parentAddressOf(store: AgentRun['store'], parentId: string | null): Promise<string | null> {
  if (parentId === null) return Promise.resolve(null);
  const read = store.run(parentId).then((parent) => parent?.address ?? null);
  read.catch(() => undefined);
  return read;
}

/** Prepares the run the agent drives, or ends it when it cannot start (and says why in the trace). */
export async function prepareRun(agent: AgentRun): Promise<Prepared> {
  const { store, clock, start } = agent;
  const restored = await restoreRun(store, start.runId);
  if (!restored) throw new HarnessError(ErrorCode.RunNotFound, `run ${start.runId} is not in the store`);
  const run = restored.run;
  const spec = restored.spec as RunSpecData;
  agent.seq = restored.seq;
  const parentRead = parentAddressOf(store, run.parentId);
  // What only a workspace run needs is loaded only for one; the sandbox's probes (spawns,
  // once a thread) run while it loads rather than after, holding the thread still. An
  // executor handed in makes no sandbox, so nothing is probed for it.
  const kit = spec.contract
    ? (
        await Promise.all([
          import('./workspace-kit.js'),
          agent.ports.executor
            ? null
            : // A probe that throws throws again where the executor asks for the rungs, as it always did.
              import('../../runtime/exec/containment/rungs.js')
                .then((rungs) => rungs.probeHostRungs())
                .catch(() => undefined),
        ])
      )[0]
    : null;
  // What the harness trusts is out of its own file tools' reach too (not stored: the thread's list, each time).
  const policy = withKept(
    spec.policy ? Policy.from(spec.policy) : spec.contract ? Policy.default() : null,
    spec.contract?.root ?? '.',
  );
  // A child in a worktree of its own has it made (or found) before anything opens in it.
  const worktree =
    spec.contract?.worktree && kit
      ? await kit.openWorktree(agent, spec.contract, policy, start.provider ?? spec.provider, run.lastSeq === 0)
      : null;
  if (worktree) return endRun(agent, 'failed', worktree);
  const equipped = equip(agent, restored, spec, kit, policy);
  if (typeof equipped === 'string') return endRun(agent, 'failed', equipped);
  // A session's earlier turns on this branch, then this run's own opening and steps; after
  // a fold, the opening, the fold's notes (the earlier turns are in them) and what came after.
  const earlier = run.parentId === null && !restored.folded ? (spec.history ?? []) : [];
  const transcript: TranscriptEntry[] = [
    ...earlier,
    { role: 'user', text: opening(agent, run.task, equipped.briefing, kit) },
    ...restored.history,
  ];
  // A provider given at a resume is held to the contract's web settings as run() held the first (before a steer is taken).
  const noWeb = agent.contract?.web ? webRefusal(start.provider ?? spec.provider, agent.contract.web) : null;
  if (noWeb !== null) return endRun(agent, 'failed', `the contract asks for the web (withWeb), and ${noWeb}`);
  // Its language servers start in the background as it opens, where the policy allows it outright (never while it plans);
  // a language of its programs this host cannot run is recorded as it opens.
  const started = recordingStart(agent, run, [
    ...(kit?.authorizeServers(agent) ?? []),
    ...(agent.workspace?.programs?.fallbacks() ?? []),
  ]);
  agent.workspace?.lsp?.startAuthorized();
  // A turn's root takes what a person sent it before it started (or while it was down): a
  // run resuming a paused step takes it once that step is committed, so the words come after it.
  if (run.parentId === null && spec.session !== undefined && restored.draft === null) {
    const [waiting] = await Promise.all([store.call('takeSteers', { ...agent.fence, now: clock.now() }), started()]);
    if (waiting.interrupt) return ended('interrupted');
    for (const text of waiting.steers) transcript.push(steerTurn(text));
  }
  const providerSpec = start.provider ?? spec.provider;
  const provider = await loadProvider(providerSpec, agent.hostModels);
  if (run.lastSeq === 0 && !start.resumed) {
    const refused = await refuseIfPrimaryUnreachable(agent, providerSpec, provider);
    if (refused) return started().then(() => refused);
  }
  const parentAddress = await parentRead;
  // The window every request is fitted to: found once, recorded, read back on a resume.
  const [window] = await Promise.all([findWindow(agent, providerSpec, agent.policy, restored.window), started()]);
  if (typeof window === 'string') return endRun(agent, 'failed', window);
  const contract = agent.contract;
  const assembly = new Assembly(
    window,
    contract?.context?.share ?? DEFAULT_SHARE,
    restored,
    transcript,
    earlier.length,
    contract?.context,
    systemBlock(agent, spec, kit),
  );
  if (contract?.memory) await chooseMemory(agent, contract, assembly, restored, transcript);
  const freshness = followReads(agent, restored);
  await rollBack(agent);
  const judge: Judged | null =
    run.parentId !== null ? null : (contract ?? (spec.outputSchema ? shapeOnly(spec.outputSchema) : null));
  return {
    kind: 'prepared',
    run: {
      agent,
      restored,
      spec,
      providerSpec,
      provider,
      registry: equipped.registry,
      transcript,
      spent: restored.spent,
      budget: new Budget(store, clock, run, contract),
      assembly,
      freshness,
      options: {
        cacheKey: cacheKey(spec.session ?? run.rootId),
        ...(judge?.outputSchema ? { responseFormat: judge.outputSchema } : {}),
        ...(contract?.web ? { web: contract.web } : {}),
      },
      parentAddress,
      judge,
      mask: new Set(contract?.toolMask ?? []),
      tiered: agent.tiers && agent.tiers.families.size > 0 ? agent.tiers : null,
      // Escalation is counted from the trace like the re-prompts, so a resumed run stays escalated.
      escalation:
        contract && judge === contract && contract.escalation
          ? new Escalation(providerSpec, contract.escalation, restored.escalated, agent.hostModels)
          : null,
      draft: restored.draft,
      room: 'unchecked',
    },
  };
}

/**
 * Equips the agent with its policy, executor, workspace and tools, as the stored spec
 * says; returns the registry and the workspace's briefing, or why the run is refused
 * before its first step.
 */
function equip(
  agent: AgentRun,
  restored: RestoredRun,
  spec: RunSpecData,
  kit: WorkspaceKit | null,
  policy: Policy | null,
): { registry: ToolRegistry<AgentCall>; briefing: string | null } | string {
  const { run } = restored;
  const contract = spec.contract ?? null;
  const opened =
    contract && kit ? kit.openWorkspace(agent, contract, policy, agent.start.provider ?? spec.provider) : null;
  if (typeof opened === 'string') return opened;
  const registry = registryFor({
    mode: contract === null ? 'agent' : contract.mode,
    ...(kit ? { workspaceTools: kit.workspaceTools } : {}),
    planGate: contract?.planGate === true,
    hostTools: agent.start.tools,
    spawn: spec.spawn !== false,
    skills: (spec.skills ?? []).length > 0,
    tiers: contract?.toolTiers === true,
    memory: contract?.memory !== undefined,
    git: contract?.git === true,
    lsp: (contract?.lsp?.length ?? 0) > 0,
    browser: contract?.browser !== undefined,
    codeact: opened?.workspace.programs?.languages ?? [],
    documents: contract?.documents?.formats ?? [],
  });
  agent.equip({
    run,
    contract,
    policyData: spec.policy ?? null,
    policy,
    workspace: opened?.workspace ?? null,
    executor: opened?.executor ?? null,
    skills: spec.skills ?? [],
    agents: spec.agents ?? [],
    tiers: contract?.toolTiers ? new ToolTiers(registry, restored.expanded) : null,
    // Planning until a plan is approved; a decision is in the trace of a committed step.
    phase: contract?.planGate && run.parentId === null && !restored.planApproved ? 'planning' : 'working',
  });
  const workspace = opened?.workspace ?? null;
  return { registry, briefing: workspace ? (spec.briefing ?? workspace.briefing()) : null };
}

/**
 * {@link recordStart}, sent now: what it returns waits for it, throwing its failure. The
 * run waits once its window is found, whose record goes to the store behind it, in order:
 * a child's start waits on the store once, not twice.
 */
function recordingStart(agent: AgentRun, run: RunRecord, decided: EventData[]): () => Promise<void> {
  const recorded = recordStart(agent, run, decided).then(
    () => null,
    (error: unknown) => ({ error }),
  );
  return async () => {
    const failed = await recorded;
    if (failed) throw failed.error;
  };
}

/**
 * The run's start in its trace, the `decided` starts of its language servers, and what the
 * configuration dropped or refused of its bundles, in the root's trace once.
 */
async function recordStart(agent: AgentRun, run: RunRecord, decided: EventData[]): Promise<void> {
  const { start, contract } = agent;
  await agent.store.call('recordEvents', {
    ...agent.fence,
    events: [
      { type: 'run-start', task: run.task, address: run.address, parentId: run.parentId, resumed: start.resumed },
      ...(run.parentId === null && run.lastSeq === 0 && !start.resumed
        ? (contract?.bundleProblems ?? []).map((problem) => ({ type: 'bundle-problem' as const, ...problem }))
        : []),
      ...decided,
    ],
    now: agent.clock.now(),
  });
}

/** The first user turn: the task, and for a workspace run where it is and what is withheld. */
function opening(agent: AgentRun, task: string, briefing: string | null, kit: WorkspaceKit | null): string {
  const { contract, workspace } = agent;
  if (!contract || !workspace || !kit) return task;
  const parts = [task, briefing ?? workspace.briefing()];
  const contained = agent.executor?.contained?.();
  if (contained) parts.push(kit.containmentLine(contained));
  // The mask is stated here, past the cache breakpoint, so the tool definitions never change.
  if (contract.toolMask.length > 0) {
    parts.push(`These tools are withheld for this run; a call to one is refused: ${contract.toolMask.join(', ')}.`);
  }
  return parts.join('\n\n');
}

/** The system block before the memory block: the same bytes every request of the run, so the cached prefix holds. */
function systemBlock(agent: AgentRun, spec: RunSpecData, kit: WorkspaceKit | null): string {
  const { contract, run, skills, agents, tiers } = agent;
  const base = spec.system ?? (contract ? workspaceSystem(contract) : defaultSystem(run, spec));
  const tiered = tiers && tiers.families.size > 0 ? tiers : null;
  return [
    base,
    ...(contract?.instructions && contract.instructions.length > 0 && kit
      ? [kit.guidanceBlock(contract.instructions)]
      : []),
    // One line a skill, in the spec's sorted order.
    ...(skills.length > 0 ? [skillCatalogue(skills)] : []),
    ...(agents.length > 0 && spec.spawn !== false ? [rosterCatalogue(agents)] : []),
    // What tiers keep back, named once.
    ...(tiered ? [tiered.line()] : []),
  ].join('\n\n');
}

/** Cache affinity: an opaque digest of the tree, never its id or a path. */
function cacheKey(tree: string): string {
  return createHash('sha256').update(`io-harness session ${tree}`).digest('hex').slice(0, 32);
}

/** A fallback chain that asks for it refuses to start when its primary cannot be reached. */
async function refuseIfPrimaryUnreachable(
  agent: AgentRun,
  providerSpec: ProviderSpec,
  provider: Provider,
): Promise<Ended | null> {
  if (providerSpec.kind !== 'fallback' || !providerSpec.refuseIfPrimaryUnreachable || !provider.probe) return null;
  const refusal = await provider.probe(agent.signal).then(
    () => null,
    (error: unknown) => error,
  );
  if (!(refusal instanceof ProviderError) || refusal.kind !== 'connection') return null;
  const primary = providerSpec.providers[0];
  const name =
    primary && isHttpSpec(primary)
      ? (primary.name ?? primary.preset ?? primary.kind)
      : primary?.kind === 'host'
        ? primary.name
        : refusal.provider;
  const reason = `refused to start: the primary provider ${name} is unreachable (${refusal.message})`;
  await agent.store.call('endRun', {
    ...agent.fence,
    status: 'failed',
    reply: null,
    reason,
    events: [{ type: 'provider-unreachable', provider: name, message: refusal.message }],
    now: agent.clock.now(),
  });
  return ended('failed');
}

/** What the run's committed steps read whole, to be read again once it changes; null without a workspace. */
function followReads(agent: AgentRun, restored: RestoredRun): Freshness | null {
  const workspace = agent.workspace;
  if (!workspace) return null;
  const freshness = new Freshness((path) => {
    const resolved = workspace.workspace.resolve(path);
    return resolved.ok ? { relative: resolved.relative, absolute: resolved.absolute } : null;
  });
  for (const step of restored.steps)
    freshness.note(step.seq, step.completion.toolCalls, step.observations, changedIn(restored.stepEvents(step.seq)));
  return freshness;
}

/**
 * A step a crash interrupted after it had written files is re-run from the committed
 * state: put those files back first. (A pause clears the images of what its step had done
 * before it, in the store's pause rule: those calls are kept as made and are not made
 * again, so what they wrote stays.)
 */
async function rollBack(agent: AgentRun): Promise<void> {
  const { workspace, store } = agent;
  if (!workspace) return;
  const images = await store.stepImages(agent.start.runId, agent.seq);
  if (images.length === 0) return;
  const paths = workspace.rollBack(images);
  await store.call('clearStepImages', { ...agent.fence, seq: agent.seq, paths, now: agent.clock.now() });
}
