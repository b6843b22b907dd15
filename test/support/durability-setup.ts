/**
 * The durability suite's setup (vitest.durability.config.ts): the run's id and its
 * PostgreSQL, as for the main suite (global-setup.ts); it drives no browser and asks for
 * no containment, so it names neither.
 */
import { setupRun } from './global-setup.js';

export default function setup(): Promise<() => void> {
  return setupRun({ browser: false, containment: false });
}
