// model.mjs — answers from a function of the request
import { scriptedProvider } from 'io-harness/testing';
export default () =>
  scriptedProvider((request) => {
    const turn = request.transcript.filter((entry) => entry.role === 'assistant').length;
    if (request.metadata.address === 'root' && turn === 0) {
      return { toolCalls: [{ name: 'spawn_agent', args: { task: 'count the files', as: 'counter' } }] };
    }
    return { text: request.metadata.address === 'root' ? 'the counter reported back' : '42 files' };
  });
