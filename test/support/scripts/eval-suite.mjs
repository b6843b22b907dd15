// Runs an eval suite from the cases in argv[2] (JSON: name, root, goal, provider, recording,
// needs, injected, deny) with the scorers named in argv[3], and prints the report as JSON.
// Started by test/eval.test.ts with the network unplugged and a guard on every socket.

import { catalogueCost, factsSurvived, refusalShare, requestCost, Suite } from '../../../dist/eval/index.js';
import { Policy, TaskContract } from '../../../dist/index.js';

const cases = JSON.parse(process.argv[2]).map((item) => ({
  name: item.name,
  contract: () => TaskContract.workspace(item.goal, item.root),
  provider: item.provider,
  recording: item.recording,
  policy: item.deny ? Policy.default().layer('app').denyWrite(item.deny) : Policy.default(),
  ...(item.needs ? { needs: item.needs } : {}),
  ...(item.injected ? { injected: item.injected } : {}),
}));
const gate = process.argv[3] === 'gate';
const suite = new Suite(cases, {
  scorers: [
    requestCost(),
    factsSurvived(gate ? { atLeast: 1 } : {}),
    catalogueCost(),
    refusalShare(gate ? { atLeast: 1 } : {}),
  ],
});
const report = await suite.run();
process.stdout.write(JSON.stringify(report));
