/**
 * The option objects of `withContext` and `withMemory`, checked: every key known, every
 * value in its range, or an {@link InvalidArgumentError} naming the option and what it takes.
 */
import { InvalidArgumentError } from '../../errors.js';
import type { ContextData } from '../context/assembler.js';
import type { MemoryData } from './contract.js';

/** withMemory's options checked, or a clear error. */
export function checkMemory(options: unknown): MemoryData {
  const where = 'withMemory';
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new InvalidArgumentError(`${where} takes { share?, cap? }, got ${JSON.stringify(options)}.`);
  const { share, cap, ...rest } = options as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw new InvalidArgumentError(
      `${where}: there is no option ${unknown.map((key) => JSON.stringify(key)).join(', ')} (the options are share and cap).`,
    );
  if (share !== undefined && (typeof share !== 'number' || !(share > 0 && share < 1)))
    throw new InvalidArgumentError(
      `${where}: share is the part of a request the memory block may take, above 0 and below 1 (such as 0.1), got ${JSON.stringify(share)}.`,
    );
  if (cap !== undefined && (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > 100_000))
    throw new InvalidArgumentError(
      `${where}: cap is how many notes the workspace keeps, a whole number from 1 to 100000 (such as 64), got ${JSON.stringify(cap)}.`,
    );
  return { ...(share === undefined ? {} : { share }), ...(cap === undefined ? {} : { cap }) };
}

/** withContext's options checked: a share in (0, 1], a window of whole tokens, rungs on or off, or a clear error. */
export function checkContext(options: unknown): ContextData {
  const where = 'withContext';
  const names = 'share, window, referenceCatalogue, collapse, reduce, snip, microcompact';
  if (typeof options !== 'object' || options === null || Array.isArray(options))
    throw new InvalidArgumentError(
      `${where} takes { ${names.replaceAll(', ', '?, ')}? }, got ${JSON.stringify(options)}.`,
    );
  const { share, window, referenceCatalogue, collapse, reduce, snip, microcompact, ...rest } = options as Record<
    string,
    unknown
  >;
  const unknown = Object.keys(rest);
  if (unknown.length > 0)
    throw new InvalidArgumentError(
      `${where}: there is no option ${unknown.map((key) => JSON.stringify(key)).join(', ')} (the options are ${names}).`,
    );
  if (share !== undefined && (typeof share !== 'number' || !(share > 0 && share <= 1)))
    throw new InvalidArgumentError(
      `${where}: share is the part of the model's window a request may fill, above 0 and at most 1 (such as 0.8), got ${JSON.stringify(share)}.`,
    );
  if (window !== undefined && (typeof window !== 'number' || !Number.isInteger(window) || window < 1024))
    throw new InvalidArgumentError(
      `${where}: window is the model's context window in tokens, a whole number of at least 1024 (such as 128000), got ${JSON.stringify(window)}.`,
    );
  for (const [name, value] of Object.entries({ referenceCatalogue, reduce, snip, microcompact }))
    if (value !== undefined && typeof value !== 'boolean')
      throw new InvalidArgumentError(`${where}: ${name} must be true or false, got ${JSON.stringify(value)}.`);
  let collapsing: ContextData['collapse'];
  if (collapse !== undefined) {
    const over = typeof collapse === 'object' && collapse !== null ? (collapse as { over?: unknown }).over : undefined;
    const valid =
      typeof collapse === 'boolean' ||
      (typeof collapse === 'object' &&
        collapse !== null &&
        Object.keys(collapse).every((key) => key === 'over') &&
        typeof over === 'number' &&
        over > 0 &&
        over < 1);
    if (!valid)
      throw new InvalidArgumentError(
        `${where}: collapse is true, false, or { over } with over the share of a request one result may take before it is sent shortened, above 0 and below 1 (such as 0.25), got ${JSON.stringify(collapse)}.`,
      );
    collapsing = typeof collapse === 'boolean' ? collapse : { over: over as number };
  }
  return {
    ...(share === undefined ? {} : { share }),
    ...(window === undefined ? {} : { window }),
    ...(referenceCatalogue === undefined ? {} : { referenceCatalogue: referenceCatalogue as boolean }),
    ...(collapsing === undefined ? {} : { collapse: collapsing }),
    ...(reduce === undefined ? {} : { reduce: reduce as boolean }),
    ...(snip === undefined ? {} : { snip: snip as boolean }),
    ...(microcompact === undefined ? {} : { microcompact: microcompact as boolean }),
  };
}
