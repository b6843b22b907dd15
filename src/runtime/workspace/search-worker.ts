/** The search pool's worker: runs one grep or find task (see ./search.ts) and returns its outcome. */
import { runSearch, type SearchOutcome, type SearchTask } from './search.js';

export default function search(task: SearchTask): SearchOutcome {
  return runSearch(task);
}
