// The per-step measuring of context assembly as it was before running sizes (commit
// 20120d9, src/runtime/context/assembler.ts and src/actors/agent/assembly.ts), copied
// here so a bench can time it beside the current code in the same process.
//  - `fit` measured the whole request (every entry, the tool list serialised);
//  - `checkPrefix` serialised the tool list, copied the transcript and compared it, entry
//    by entry, with the copy the request before kept;
//  - `measure` measured the whole request again.

const IMAGE_CHARS = 6_400;

function entryChars(entry) {
  if (entry.role === 'user') return entry.text.length + 16;
  if (entry.role === 'assistant') return entry.text.length + 16 + JSON.stringify(entry.toolCalls).length;
  return (
    entry.content.length + entry.callId.length + entry.name.length + 32 + (entry.images?.length ?? 0) * IMAGE_CHARS
  );
}

function requestChars(system, tools, transcript) {
  let total = system.length + JSON.stringify(tools).length;
  for (const entry of transcript) total += entryChars(entry);
  return total;
}

function prefixBreak(before, now) {
  if (before.system !== now.system) return 'system';
  if (before.tools !== now.tools) return 'tools';
  if (now.transcript.length < before.transcript.length) return 'transcript';
  for (let index = 0; index < before.transcript.length; index++) {
    const a = before.transcript[index];
    const b = now.transcript[index];
    if (a !== b && JSON.stringify(a) !== JSON.stringify(b)) return 'transcript';
  }
  return null;
}

/** One run's assembly as it was: `step()` is what checkWindow did for every request. */
export class AssemblyBefore {
  #previous = null;

  step(system, tools, transcript) {
    requestChars(system, tools, transcript);
    const now = { system, tools: JSON.stringify(tools), transcript: [...transcript] };
    const before = this.#previous;
    this.#previous = now;
    const broke = before ? prefixBreak(before, now) : null;
    return { chars: requestChars(system, tools, transcript), broke };
  }
}
