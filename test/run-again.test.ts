/**
 * The latch a tree's admission and settling, and a host's claims, each hold: one pass at a
 * time, and a pass asked for while one runs (or while something it must not overlap runs)
 * is owed and runs once more after it, however often it was asked.
 */
import { describe, expect, it } from 'vitest';
import { RunAgain } from '../dist/supervisor/tree.js';

describe('the run-again latch', () => {
  it('starts a pass when none runs, and owes one more pass however often it is asked meanwhile', () => {
    const latch = new RunAgain();
    expect(latch.running).toBe(false);
    expect(latch.request()).toBe(true);
    expect(latch.running).toBe(true);
    expect(latch.again()).toBe(false);
    expect(latch.request()).toBe(false);
    expect(latch.request()).toBe(false);
    expect(latch.again()).toBe(true);
    // The ask was taken: one more pass, not two.
    expect(latch.again()).toBe(false);
    latch.done();
    expect(latch.running).toBe(false);
  });

  it('owes a pass asked for while blocked, and starts none', () => {
    const latch = new RunAgain();
    expect(latch.request(true)).toBe(false);
    expect(latch.running).toBe(false);
    expect(latch.again()).toBe(true);
    expect(latch.again()).toBe(false);
  });

  it('forgets an ask owed before a pass that it then starts', () => {
    const latch = new RunAgain();
    latch.request(true);
    expect(latch.request()).toBe(true);
    expect(latch.again()).toBe(false);
    latch.done();
  });

  it('drives a loop that runs exactly once more for the asks made during a pass', async () => {
    const latch = new RunAgain();
    let passes = 0;
    const run = async (asks: number) => {
      if (!latch.request()) return;
      try {
        do {
          passes++;
          await Promise.resolve();
          for (let ask = 0; ask < asks; ask++) void run(0);
          asks = 0;
        } while (latch.again());
      } finally {
        latch.done();
      }
    };
    await run(3);
    expect(passes).toBe(2);
    expect(latch.running).toBe(false);
  });
});
