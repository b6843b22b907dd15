// Starts an agent pool and closes it while its threads are still starting, again and
// again at delays spread over when a thread loads its entry (100 to 260 ms here, where
// a synchronous ES module require is most often in flight); prints `survived` if the
// process lives.
import { ActorPool } from '../../../dist/actors/agent.js';

const rounds = Number(process.argv[2] ?? 40);
for (let i = 0; i < rounds; i++) {
  const pool = new ActorPool({ isolation: 'shared', threads: 2 });
  pool.start();
  await new Promise((resolve) => setTimeout(resolve, 100 + ((i * 37) % 160)));
  await pool.destroy();
}
console.log('survived');
