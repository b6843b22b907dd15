// The scripted model the demo runs on: a function of each request, so every agent of
// the tree gets its own answers and the whole run needs no key and no network.
import { scriptedProvider, toolResults, turn } from 'io-harness/testing';

export default function demoModel(options = {}) {
  const workers = options.workers ?? 8;
  return scriptedProvider(
    (request) => {
      const { address } = request.metadata;
      const step = turn(request);
      if (address === 'root') {
        if (step === 0) {
          return {
            text: `Splitting the survey across ${workers} workers.`,
            toolCalls: Array.from({ length: workers }, (_, i) => ({
              name: 'spawn_agent',
              args: { task: `survey part ${i + 1} of ${workers}`, as: `worker-${i + 1}`, wait: false },
            })),
          };
        }
        const reports = toolResults(request)
          .filter((result) => result.name === 'read_messages' && result.content.startsWith('['))
          .flatMap((result) => JSON.parse(result.content));
        if (reports.length < workers) return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
        return { text: `All ${workers} workers reported: ${reports.map((r) => r.from).join(', ')}.` };
      }
      const index = Number(address.split('-')[1]);
      const partnerOfOdd = index + 1 <= workers ? `worker-${index + 1}` : null;
      if (index % 2 === 0) {
        // Even workers send a finding to the odd worker before them, then finish.
        if (step === 0) {
          return {
            toolCalls: [{ name: 'send_message', args: { to: `worker-${index - 1}`, body: `finding from ${address}` } }],
          };
        }
        return { text: `part ${index} surveyed; told worker-${index - 1}.` };
      }
      // Odd workers wait for their partner's finding (if they have one), then finish.
      if (partnerOfOdd && step === 0) return { toolCalls: [{ name: 'read_messages', args: { wait_secs: 30 } }] };
      const heard = toolResults(request).find((result) => result.name === 'read_messages');
      return { text: `part ${index} surveyed${heard ? `; heard ${JSON.parse(heard.content)[0]?.body}` : ''}.` };
    },
    { latencyMs: options.latencyMs ?? 150 },
  );
}
