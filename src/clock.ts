/**
 * The clock the lease and admission logic and a run's wall-clock deadline read. Injectable
 * so tests decide what time it is; the default reads the system clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Calls `fire` once `ms` have passed by this clock, and returns what cancels it. A clock
   * without one is read for the delay and waited on with the system's timers.
   */
  setTimer?(fire: () => void, ms: number): () => void;
}

export const systemClock: Clock = { now: () => Date.now(), setTimer: systemTimer };

/** A timer on `clock`: its own when it keeps time for timers, else the system's. */
export function setTimer(clock: Clock, fire: () => void, ms: number): () => void {
  return clock.setTimer ? clock.setTimer(fire, ms) : systemTimer(fire, ms);
}

function systemTimer(fire: () => void, ms: number): () => void {
  const timer = setTimeout(fire, ms);
  return () => clearTimeout(timer);
}

/**
 * A clock that only moves when told to, for deterministic tests of leases and deadlines.
 * Its timers fire when it is moved to or past their time, as a system timer does: on the
 * event loop's next turn, never inside the code that moved it (so a step that never yields
 * meets a passed deadline at its next check, not through the timer).
 *
 * @example
 * const clock = new ManualClock();
 * clock.setTimer(() => console.log('due'), 1_000);
 * clock.advance(1_000); // 'due' is logged on the next turn of the event loop
 */
export class ManualClock implements Clock {
  #now: number;
  readonly #timers = new Set<{ at: number; fire: () => void }>();

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  setTimer(fire: () => void, ms: number): () => void {
    const timer = { at: this.#now + Math.max(0, ms), fire };
    this.#timers.add(timer);
    this.#due();
    return () => {
      this.#timers.delete(timer);
    };
  }
  advance(ms: number): void {
    this.#now += ms;
    this.#due();
  }
  set(ms: number): void {
    this.#now = ms;
    this.#due();
  }

  /** The timers whose time has come fire on the loop's next turn, unless cancelled first. */
  #due(): void {
    for (const timer of [...this.#timers]) {
      if (timer.at > this.#now) continue;
      setImmediate(() => {
        if (this.#timers.delete(timer)) timer.fire();
      });
    }
  }
}
