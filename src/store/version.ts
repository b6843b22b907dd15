/**
 * The store's schema version, in a module of its own: the public declarations export it
 * without reaching the SQLite binding's types (a dev dependency), so a consumer type-checks
 * with what the package depends on.
 */
export const SCHEMA_VERSION = 11;
