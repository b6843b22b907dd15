// A process that drives a browser run until it is killed (test/browser.test.ts): the store at
// STORE, the workspace at ROOT, the scripted model at MODEL. It prints `root <id>` once started.
import { OpenAI, Policy, Store, Supervisor, TaskContract } from '../../dist/index.js';

const store = await Store.open(process.env.STORE);
const supervisor = await Supervisor.start(store);
const handle = supervisor.run({
  contract: TaskContract.workspace('look at the fixture site', process.env.ROOT).withBrowser(),
  provider: OpenAI.create({ model: 'scripted', baseUrl: process.env.MODEL, apiKey: 'k' }),
  policy: Policy.default().layer('test').allowNet('127.0.0.1').denyNet('denied.test'),
});
handle.result.catch(() => undefined);
process.stdout.write(`root ${handle.rootId}\n`);
await new Promise(() => undefined);
