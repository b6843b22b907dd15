/** The table of event types the actor-runtime guide carries (see events-list.mjs). */
export function eventsTable(): string;
