/** A host for an agent run outside a supervisor: every service refuses, unless the test gives its own. */
import type { AgentHost } from '../../dist/runtime/tools/ports.js';

export function stubHost(services: Partial<AgentHost> = {}): AgentHost {
  const refuse = (what: string) => () => Promise.reject(new Error(`no ${what} in this test`));
  return {
    approve: refuse('approver'),
    reviewPlan: refuse('plan gate'),
    askOperator: refuse('operator'),
    waitChild: refuse('children'),
    callTool: refuse('tools'),
    checkTool: refuse('tools'),
    abortTool: refuse('tools'),
    complete: refuse('host models'),
    ...services,
  };
}
