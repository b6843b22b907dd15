/**
 * What a command check keeps as it goes: every decision made, the first deny, and how
 * many path acts were decided (a stage whose count moved depends on names).
 */
import type { Decision } from '../policy.js';

/** What a command check says: refused (the first deny, with its rule and layer) or allowed/asked, with every decision made. */
export type CommandCheck =
  | { ok: true; decisions: Decision[]; effect: 'allow' | 'ask' }
  | { ok: false; rule: string; layer: string | null; reason: string; decisions: Decision[] };

export class Tally {
  readonly decisions: Decision[] = [];
  /** How many path decisions have been made (redirects, path arguments, cd): a stage whose count moved depends on names. */
  pathActs = 0;
  denied: { rule: string; layer: string | null; reason: string } | null = null;

  /** Records a decision; true when it denies (the check stops). */
  add(decision: Decision): boolean {
    this.decisions.push(decision);
    if (decision.effect === 'deny' && this.denied === null) {
      this.denied = { rule: decision.rule ?? 'policy.no-rule', layer: decision.layer, reason: decision.reason };
    }
    return this.denied !== null;
  }

  /** A refusal by the boundary itself, not by a policy layer. */
  refuse(rule: string, subject: string, reason: string): true {
    this.add({ effect: 'deny', rule, layer: null, subject, reason });
    return true;
  }

  ask(rule: string, subject: string): void {
    this.decisions.push({ effect: 'ask', rule, layer: 'boundary', subject });
  }

  result(): CommandCheck {
    if (this.denied) return { ok: false, ...this.denied, decisions: this.decisions };
    const effect = this.decisions.some((decision) => decision.effect === 'ask') ? 'ask' : 'allow';
    return { ok: true, decisions: this.decisions, effect };
  }
}
