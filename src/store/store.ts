/**
 * The embedder's handle on a store file. Opening checks the file (a file that is not
 * SQLite, or whose schema is newer than this code, is refused with nothing written)
 * and brings the schema up to date; the handle then reads through its own read-only
 * connection. Writes happen only in the store actor a {@link Supervisor} starts.
 */
import { resolve } from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import { TraceReader } from './reader.js';
import { openWriter } from './schema.js';

export interface StoreOptions {
  /** `NORMAL` (default) survives a process crash; `FULL` also survives power loss, at about a third of the commit rate. */
  synchronous?: 'NORMAL' | 'FULL';
}

export class Store extends TraceReader {
  readonly synchronous: 'NORMAL' | 'FULL';

  private constructor(path: string, options: StoreOptions) {
    super(path);
    this.synchronous = options.synchronous ?? 'NORMAL';
  }

  /**
   * Opens (creating if needed) the store at `path`.
   *
   * @example
   * const store = await Store.open('runs.db');
   * console.log(store.runs());
   */
  static async open(path: string, options: StoreOptions = {}): Promise<Store> {
    if (typeof path !== 'string' || path.length === 0) {
      throw new InvalidArgumentError('Store.open needs the path of a SQLite file, for example Store.open("runs.db").');
    }
    if (options.synchronous !== undefined && options.synchronous !== 'NORMAL' && options.synchronous !== 'FULL') {
      throw new InvalidArgumentError(
        `Store.open: synchronous must be "NORMAL" or "FULL", got ${JSON.stringify(options.synchronous)}.`,
      );
    }
    const absolute = resolve(path);
    openWriter(absolute, options).close();
    return new Store(absolute, options);
  }
}
