/** Types of ./pinned-requests.mjs (plain JavaScript, so it runs against an older release's build as it is). */
export const REQUEST: unknown;
export const CONFIGS: Record<'openai' | 'openrouter' | 'compatible' | 'anthropic', Record<string, unknown>>;
export function pinnedRequests(
  wires: { anthropicWire: unknown; openAiWire: unknown },
  web?: Record<string, Record<string, unknown>>,
): Record<string, { url: string; headers: Record<string, string>; body: string }>;
