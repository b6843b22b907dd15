/** The memory block a run's requests carry, chosen once and read back from the trace on a resume. */
import {
  DEFAULT_MEMORY_SHARE,
  GLOBAL_SCOPE,
  memoryBlock,
  runTerms,
  visibleNotes,
  workspaceScope,
} from '../../runtime/context/memory.js';
import type { ContractData } from '../../runtime/contract/contract.js';
import type { TranscriptEntry } from '../../runtime/provider.js';
import { type Assembly, namedPaths } from './assembly.js';
import type { AgentRun } from './run.js';
import type { RestoredRun } from './step.js';

/**
 * The memory block the run's requests carry: read back from the trace on a resume (the
 * same bytes, whatever the memory holds by now); at the start, the workspace's notes
 * and the global ones fitted to the block's share, recorded with the notes it carried
 * as drawn on by this run.
 */
export async function chooseMemory(
  agent: AgentRun,
  contract: ContractData,
  assembly: Assembly,
  restored: RestoredRun,
  transcript: TranscriptEntry[],
): Promise<void> {
  const { store } = agent;
  if (restored.memory !== null) {
    assembly.useMemory({ ...restored.memory, goal: contract.goal });
    return;
  }
  const notes = visibleNotes(await store.notes([GLOBAL_SCOPE, workspaceScope(contract.root)]));
  const share = contract.memory?.share ?? DEFAULT_MEMORY_SHARE;
  const block = memoryBlock(notes, runTerms(contract.goal, namedPaths(transcript)), assembly.memoryRoom(share));
  assembly.useMemory({ text: block.text, notes: block.kept, goal: contract.goal });
  await store.call('recordEvents', {
    ...agent.fence,
    events: [
      {
        type: 'memory-block',
        notes: block.kept.map((note) => note.key),
        held: notes.length,
        chars: block.text.length,
        text: block.text,
        kept: block.kept,
      },
    ],
    now: agent.clock.now(),
  });
  if (block.kept.length > 0)
    await store.call('drawNotes', {
      by: agent.fence,
      noteIds: block.kept.map((note) => note.id),
      how: 'block',
      now: agent.clock.now(),
    });
}
