// A root that spawns one agent, "waiter", without waiting on it, and answers; the waiter
// reads its inbox with `waitSecs` (nothing ever arrives) and answers. With `waitingMarker`
// (a path), the file is written as the waiter is told to wait: its wait starts now.
// Served over HTTP by the scripted model server of each host that drives it, so each host
// can give its own `waitSecs`.
import { writeFileSync } from 'node:fs';
import { assistantTurns, systemText } from '../../../dist/testing/index.js';

export function waiterScript(options = {}) {
  return (call) => {
    const address = /You are agent "([^"]+)"/.exec(systemText(call))?.[1] ?? '?';
    const step = assistantTurns(call);
    if (address === 'root') {
      if (step === 0)
        return { toolCalls: [{ name: 'spawn_agent', args: { task: 'wait for mail', as: 'waiter', wait: false } }] };
      return { text: 'spawned the waiter' };
    }
    if (step === 0) {
      if (options.waitingMarker) writeFileSync(options.waitingMarker, 'waiting');
      return { toolCalls: [{ name: 'read_messages', args: { wait_secs: options.waitSecs ?? 0 } }] };
    }
    return { text: 'waited' };
  };
}
