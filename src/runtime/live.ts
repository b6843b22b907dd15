/**
 * The live channel: what an agent is doing as it happens, not yet a committed fact — the
 * text of a completion as the model streams it, a model call starting, a tool call
 * starting and ending. Nothing durable depends on it: a live event may be lost with its
 * thread, and the trace stays the record. Published on named `diagnostics_channel`s (which
 * cost nothing while nobody subscribes) and to the supervisor's observers that ask for it.
 */
import diagnostics from 'node:diagnostics_channel';

/** What an agent publishes, without where it came from. */
export type LiveData =
  | { type: 'model-call-start'; seq: number }
  | { type: 'text-delta'; seq: number; text: string }
  | { type: 'tool-call-start'; seq: number; callId: string; name: string; index: number }
  | { type: 'tool-call-end'; seq: number; callId: string; name: string; index: number; isError: boolean };

/**
 * A live event as observers see it: marked `live: true`, and with no event id (a committed
 * event has one), so the two are never confused.
 */
export type LiveEvent = LiveData & {
  live: true;
  rootId: string;
  runId: string;
  address: string;
  /** Milliseconds since the epoch, on the publishing side. */
  at: number;
};

/** The channel each kind of live event is published on. */
export const LIVE_CHANNELS = {
  'model-call-start': 'io-harness:model-call',
  'text-delta': 'io-harness:text-delta',
  'tool-call-start': 'io-harness:tool-call',
  'tool-call-end': 'io-harness:tool-call',
} as const satisfies Record<LiveData['type'], string>;

const channels = {
  'io-harness:model-call': diagnostics.channel('io-harness:model-call'),
  'io-harness:text-delta': diagnostics.channel('io-harness:text-delta'),
  'io-harness:tool-call': diagnostics.channel('io-harness:tool-call'),
};

/** True when some `diagnostics_channel` subscriber listens to a live channel. */
export function liveChannelsWanted(): boolean {
  return Object.values(channels).some((channel) => channel.hasSubscribers);
}

/** Publishes a live event on its channel, when that channel has a subscriber. */
export function publishLive(event: LiveEvent): void {
  const channel = channels[LIVE_CHANNELS[event.type]];
  if (channel.hasSubscribers) channel.publish(event);
}

/** Where an agent's loop sends what it does as it happens. */
export interface LivePort {
  publish(data: LiveData): void;
  /**
   * Resolves once what was published has reached its listeners: called before a step
   * commits, so a step's live events come before its committed ones.
   */
  flush(): Promise<void>;
}
