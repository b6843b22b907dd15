/**
 * A provider's key as its thread reads it, checked the one way for every kind of provider
 * (the harness's own wires, an AI SDK model): one with a stray space or line break is
 * refused, naming where it came from.
 */
import { ErrorCode, HarnessError } from '../../errors.js';
import { strayWhitespace } from '../secrets.js';

/** `key`, or a refusal naming `source` (`the environment variable OPENAI_API_KEY`) and the provider. */
export function checkedKey(key: string, source: string, name: string): string {
  if (strayWhitespace(key))
    throw new HarnessError(
      ErrorCode.ProviderLoadFailed,
      `${name}: the API key from ${source} has a stray space or line break at its start or end (or inside it), which no vendor accepts; remove it (a key copied from a file often ends in a newline).`,
    );
  return key;
}
