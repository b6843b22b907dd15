/** The table of io.toml's keys the configuration guide carries (see config-keys.mjs). */
export function keysTable(): string;
