// A scripted model that plays a list of turns, by how many assistant turns the transcript
// already holds; past the list it answers "done". Used where a test runs an agent in-process.
import { scriptedProvider } from '../../../dist/testing/index.js';

export default function turns(options) {
  return scriptedProvider((request) => {
    const turn = request.transcript.filter((entry) => entry.role === 'assistant').length;
    return options.turns[turn] ?? { text: 'done' };
  });
}
