// The rows one benchmark step commits: a realistic completion, one tool call and its
// observation, the draw, the accounting row, the events. The raw baseline and the store
// actor commit the same.
export const completion = {
  text: 'I will read the failing test first, then look at the module it imports and patch the off-by-one in the range check.',
  toolCalls: [{ id: 'call_1', name: 'read_messages', args: { wait_secs: 0 } }],
  usage: { inputTokens: 1200, outputTokens: 80 },
  model: 'bench',
};
export const observations = [
  {
    callId: 'call_1',
    name: 'read_messages',
    content: JSON.stringify([{ id: 'm1', from: 'root', body: 'x'.repeat(240) }]).slice(0, 300),
    isError: false,
  },
];
export const calls = [
  {
    provider: 'openai',
    model: 'bench',
    outcome: 'ok',
    statusCode: null,
    inputTokens: 1200,
    outputTokens: 80,
    cacheReadTokens: 1024,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    latencyMs: 812.5,
    ttftMs: 240.1,
  },
];
export const events = [{ type: 'tool-call', callId: 'call_1', name: 'read_messages', args: { wait_secs: 0 } }];

export function stepInput(fence, seq) {
  return {
    ...fence,
    seq,
    completion,
    observations,
    usage: completion.usage,
    consumed: [],
    sent: [],
    spawned: [],
    calls,
    events,
    final: null,
    now: Date.now(),
  };
}

export const rootInput = (runId, owner) => ({
  runId,
  task: 'bench',
  spec: { provider: null },
  ceilings: { steps: null, tokens: null, wallMs: null },
  maxTotalAgents: null,
  maxConcurrentAgents: null,
  maxWaitSecs: 30,
  claim: { owner, pid: process.pid, host: 'bench', ttlMs: 600_000, now: Date.now() },
});
