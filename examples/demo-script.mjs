// The scripted model the demo runs on: the embedded model server answers each request
// over the OpenAI wire, as a function of what the agent sent, so every agent of the tree
// gets its own answers and the whole run needs no key and no network.
import { assistantTurns, systemText, wireToolResults } from 'io-harness/testing';

export function demoModel({ workers = 8, latencyMs = 150 } = {}) {
  return (call) => {
    const address = /You are agent "([^"]+)"/.exec(systemText(call))?.[1] ?? '?';
    const step = assistantTurns(call);
    const reads = wireToolResults(call).filter(
      (result) => result.name === 'read_messages' && result.content.startsWith('['),
    );
    if (address === 'root') {
      if (step === 0) {
        return {
          latencyMs,
          text: `Splitting the survey across ${workers} workers.`,
          toolCalls: Array.from({ length: workers }, (_, i) => ({
            name: 'spawn_agent',
            args: { task: `survey part ${i + 1} of ${workers}`, as: `worker-${i + 1}`, wait: false },
          })),
        };
      }
      const reports = reads.flatMap((result) => JSON.parse(result.content));
      if (reports.length < workers)
        return { latencyMs, toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
      return {
        latencyMs,
        text: `All ${workers} workers reported: ${reports.map((report) => report.from).join(', ')}.`,
      };
    }
    const index = Number(address.split('-')[1]);
    if (index % 2 === 0) {
      // Even workers send a finding to the odd worker before them, then finish.
      if (step === 0) {
        return {
          latencyMs,
          toolCalls: [{ name: 'send_message', args: { to: `worker-${index - 1}`, body: `finding from ${address}` } }],
        };
      }
      return { latencyMs, text: `part ${index} surveyed; told worker-${index - 1}.` };
    }
    // Odd workers wait for their partner's finding (if they have one), then finish.
    if (index + 1 <= workers && step === 0)
      return { latencyMs, toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
    const heard = reads[0] ? JSON.parse(reads[0].content)[0]?.body : null;
    return { latencyMs, text: `part ${index} surveyed${heard ? `; heard ${heard}` : ''}.` };
  };
}
