/** The table of io.toml's keys the configuration guide carries (see config-keys.mjs). */
export function keysTable(): string;
/** The table of keys renamed since an earlier release the configuration guide carries. */
export function renamedTable(): string;
