/**
 * The price table `cost --prices <file>` reads: JSON, or TOML as io.toml's `[prices]`
 * has it, checked before anything is priced.
 */
import { readFileSync } from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import type { PriceTable } from '../runtime/budget.js';
import { CliError, EXIT } from './command.js';

const priceSchema = z.record(
  z.string().min(1),
  z.strictObject({
    input: z.number().min(0),
    output: z.number().min(0),
    cacheRead: z.number().min(0).optional(),
    cacheWrite: z.number().min(0).optional(),
    webSearch: z.number().min(0).optional(),
    webFetch: z.number().min(0).optional(),
  }),
);

/** The table in `file`, or a usage error saying what is wrong with it. */
export function readPrices(file: string): PriceTable {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`--prices ${file} cannot be read (${(error as NodeJS.ErrnoException).code}).`, EXIT.notFound);
  }
  let data: unknown;
  try {
    if (file.endsWith('.toml')) {
      const parsed = parseToml(text) as Record<string, unknown>;
      const table = parsed.prices as Record<string, Record<string, unknown>> | undefined;
      if (typeof table !== 'object' || table === null || Array.isArray(table))
        throw new Error('it has no [prices.<model>] tables (set input and output for each model, as io.toml has them)');
      data = Object.fromEntries(
        Object.entries(table).map(([model, price]) => [
          model,
          Object.fromEntries(
            Object.entries(price).map(([key, value]) => [
              key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
              value,
            ]),
          ),
        ]),
      );
    } else data = JSON.parse(text);
  } catch (error) {
    throw new CliError(
      `--prices ${file} is not valid ${file.endsWith('.toml') ? 'TOML' : 'JSON'}: ${(error as Error).message}`,
      EXIT.usage,
    );
  }
  const checked = priceSchema.safeParse(data);
  if (!checked.success)
    throw new CliError(
      `--prices ${file}: ${checked.error.issues.map((issue) => `${issue.path.join('.') || '(the table)'}: ${issue.message}`).join('; ')}. A table is { "model": { "input": 3, "output": 15 } }, dollars per million tokens.`,
      EXIT.usage,
    );
  return checked.data as PriceTable;
}
