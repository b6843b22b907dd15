/**
 * How many times a final answer is sent back by default: re-prompts after an answer out of
 * shape, and tries after a failing gate, each counted on its own (`withRetries`). Its own
 * module so an agent's thread reads it without loading the contract's builder.
 */
export const DEFAULT_RETRIES = 2;
