// A model for a driver process that reads big.txt for `steps` steps, then answers; a fold's
// request gets notes. Every request's messages are appended to `log`, one JSON line each,
// so a test can compare what two processes sent. The steps answered so far are counted in
// `log`'s own lines, so a resumed process goes on counting where the killed one stopped;
// call ids are named by step, not by the server's own count, which starts again in a new process.
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

const FOLD_ASKED = 'Your context is nearly full';

/** Logs a request's messages to `log`; whether it is a fold's, and (when not) which step it asks for, counted from the log. */
function logged(call, log) {
  const messages = call.body.messages;
  const fold = JSON.stringify(messages.at(-1)?.content ?? '').includes(FOLD_ASKED);
  const answered = existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line.startsWith('{"fold":false')).length
    : 0;
  appendFileSync(log, `${JSON.stringify({ fold, messages })}\n`);
  return { fold, step: answered + 1 };
}

export function readerScript(options) {
  return (call) => {
    const { fold, step } = logged(call, options.log);
    if (fold) return { text: 'notes: big.txt holds the numbers; keep reading.' };
    return step <= options.steps
      ? { text: `read ${step}`, toolCalls: [{ id: `read_${step}`, name: 'read_file', args: { path: 'big.txt' } }] }
      : { text: 'done reading' };
  };
}

// A model that looks things up for `steps` steps, three calls a step (find, grep, then
// read_file), then answers; a fold's request gets notes. Logged and counted as readerScript is.
export function lookupScript(options) {
  return (call) => {
    const { fold, step } = logged(call, options.log);
    if (fold) return { text: 'notes: the lookups agree; keep looking.' };
    return step <= options.steps
      ? {
          text: `look ${step}`,
          toolCalls: [
            { id: `find_${step}`, name: 'find', args: { pattern: '*.txt' } },
            { id: `grep_${step}`, name: 'grep', args: { pattern: 'line' } },
            { id: `read_${step}`, name: 'read_file', args: { path: 'big.txt' } },
          ],
        }
      : { text: 'done looking' };
  };
}
