/**
 * The zod pieces the edges share: what users hand in (supervisor, run and resume options,
 * tool declarations, contracts from JSON) is checked with these, so a count, a string or
 * an object is refused in the same words everywhere, and zod's findings become sentences
 * the same way. Each message says what the value must be and what it was, without a full
 * stop: an edge joins them with `; ` and ends the sentence. Main thread only: agent
 * threads never load zod.
 */
import { z } from 'zod';
import { shownValue } from '../errors.js';

/** A whole number of at least `min`. */
export const wholeNumber = (name: string, min: number) =>
  z.custom<number>((value) => typeof value === 'number' && Number.isInteger(value) && value >= min, {
    error: (issue) => `${name} must be a whole number of at least ${min}, got ${shownValue(issue.input)}`,
  });

export const text = (name: string) =>
  z.custom<string>((value) => typeof value === 'string', {
    error: (issue) => `${name} must be a string, got ${shownValue(issue.input)}`,
  });

export const strings = (name: string) =>
  z.custom<string[]>((value) => Array.isArray(value) && value.every((item) => typeof item === 'string'), {
    error: (issue) => `${name} must be an array of strings, got ${shownValue(issue.input)}`,
  });

/** A plain object (not an array, not null), such as `example`. */
export const plainObject = (name: string, example: string) =>
  z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
    error: (issue) => `${name} must be an object, e.g. ${example}, got ${shownValue(issue.input)}`,
  });

/** An object with the method `method` (an approver, a plan gate, a clock). */
export const withMethod = <T>(name: string, method: string, example: string) =>
  z.custom<T>(
    (value) =>
      typeof value === 'object' && value !== null && typeof (value as Record<string, unknown>)[method] === 'function',
    { error: `${name} must have a ${method}(...) method, e.g. ${example}` },
  );

/** One of `values`, said in `expected`. */
export const oneOf = <T extends string>(name: string, values: readonly T[], expected: string) =>
  z.custom<T>((value) => values.includes(value as T), {
    error: (issue) => `${name} must be ${expected}, got ${shownValue(issue.input)}`,
  });

/** What zod found, as sentences; keys the schema does not have are put by `unknown` (given the keys and where). */
export function problemsOf(error: z.ZodError, unknown: (keys: string[], path: PropertyKey[]) => string): string[] {
  return error.issues.map((issue) =>
    issue.code === 'unrecognized_keys' ? unknown(issue.keys, issue.path) : issue.message,
  );
}

/** Keys as a message lists them: quoted, comma-separated. */
export function quotedKeys(keys: readonly string[]): string {
  return keys.map((key) => JSON.stringify(key)).join(', ');
}
