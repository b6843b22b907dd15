/**
 * Secrets scrubbed by value. A list of header names to leave out of what is stored
 * misses every credential that goes by another name (`X-Auth`, `X-Session`), sits in a URL
 * (`https://user:pass@host`, `?api_key=`), or comes back in a vendor's error body. So the
 * harness works from the other end: it derives the VALUES of every secret it holds and
 * replaces each one wherever it occurs, whatever the text around it.
 *
 * What counts as a secret ({@link providerSecrets}, {@link urlSecrets},
 * {@link connectionSecrets}):
 * - a provider's key, given directly or read from its environment variable;
 * - the value of every header a provider sends except the few known to be harmless
 *   ({@link HARMLESS_HEADERS}); for `<scheme> <token>` values (`Bearer ...`) the token too;
 * - the user name and password of a provider's base URL, and the value of every query
 *   parameter whose name looks like a key ({@link isKeyLikeName});
 * - a database password, in a URL (`postgres://user:pass@host`, `?password=`,
 *   `?sslpassword=`) or in key/value form (`host=h password=p`, quoted values too).
 *
 * How it is scrubbed ({@link scrubText}, {@link scrubValue}, {@link scrubError}): every
 * occurrence of the value is replaced by {@link MASK}, and so is its URL-encoded and its
 * JSON-escaped spelling where those differ. A value shorter than
 * {@link MIN_SECRET_LENGTH} characters is not scrubbed as a substring: replacing `on` or
 * `1234` everywhere would mangle text and hide nothing worth hiding; such a value is still
 * left out of stored specs and connection strings by structure.
 *
 * The values a thread has been handed are held in that thread ({@link holdSecrets}); the
 * supervisor forwards its own to the store actor, which scrubs every write it serves. A
 * value is held for the life of the thread: more is scrubbed, never less.
 */
import type { AiSdkProviderSpec, HttpProviderSpec, ProviderSpec } from './provider.js';
import { findPreset } from './providers/presets.js';

/** What a secret is replaced by. Safe inside JSON strings and URLs alike. */
export const MASK = '***';

/** The shortest value scrubbed as a substring (see the module's comment). */
export const MIN_SECRET_LENGTH = 8;

/**
 * Request headers whose values are never secrets: what a provider sends to say what it
 * speaks and who it is. Every other header's value is a secret, whatever its name.
 */
export const HARMLESS_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-encoding',
  'accept-language',
  'anthropic-beta',
  'anthropic-version',
  'cache-control',
  'content-type',
  'http-referer',
  'openai-beta',
  'user-agent',
  'x-title',
]);

/** The environment variable each vendor's key is read from when a spec names none. */
export const DEFAULT_KEY_ENV = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
  openrouter: 'OPENROUTER_API_KEY',
} as const;

/**
 * Whether a query parameter (or key/value) name looks like it holds a credential. The
 * name is split into words (at `-`, `_`, `.`, spaces and camelCase); it is key-like when
 * a word is `key`, `apikey`, `sig`, `signature`, `pwd`, `pass`, `auth`, `authorization`
 * or `authentication`, or contains `token`, `secret`, `passw`, `credential`, `session` or
 * `cookie`. So `api_key`, `apiKey`, `access_token`, `X-Amz-Signature`, `sslpassword` and
 * `client_secret` are; `keyword`, `monkey` and `author` are not.
 */
export function isKeyLikeName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  return words.some(
    (word) =>
      /^(api)?key$|^sig(nature)?$|^pwd$|^pass$|^auth(orization|entication)?$/.test(word) ||
      /token|secret|passw|credential|session|cookie/.test(word),
  );
}

/** Whether a header's value may be kept and shown: its name is on {@link HARMLESS_HEADERS}. */
export function isHarmlessHeader(name: string): boolean {
  return HARMLESS_HEADERS.has(name.toLowerCase());
}

/** The environment variable an HTTP spec's key is read from, if any. */
export function keyVariableOf(spec: HttpProviderSpec): string | null {
  if (spec.apiKeyEnv) return spec.apiKeyEnv;
  if (spec.kind !== 'compatible') return DEFAULT_KEY_ENV[spec.kind];
  const preset = spec.preset ? findPreset(spec.preset) : undefined;
  return preset && !preset.local ? `${preset.envPrefix}_API_KEY` : null;
}

/** A header's value, and for `<scheme> <token>` (`Bearer abc`, `Basic abc`) the token alone too. */
function headerSecrets(value: string): string[] {
  const token = /^[A-Za-z][\w-]*\s+(\S.*)$/.exec(value.trim())?.[1];
  return token === undefined ? [value] : [value, token];
}

/**
 * The secrets a provider spec holds: its key (given, or read from `env`), every header
 * value but the harmless ones, and its base URL's credentials. A fallback's members are
 * included; a module provider's options are its own and are not read.
 */
export function providerSecrets(spec: ProviderSpec, env: NodeJS.ProcessEnv = process.env): string[] {
  if (spec.kind === 'fallback') return spec.providers.flatMap((inner) => providerSecrets(inner, env));
  if (spec.kind === 'module' || spec.kind === 'host') return [];
  if (spec.kind === 'ai-sdk') return aiSdkSecrets(spec, env);
  const found: string[] = [];
  const variable = keyVariableOf(spec);
  if (spec.apiKey) found.push(spec.apiKey);
  else if (variable && env[variable]) found.push(env[variable] as string);
  for (const [name, value] of Object.entries(spec.headers ?? {}))
    if (!isHarmlessHeader(name) && typeof value === 'string') found.push(...headerSecrets(value));
  if (spec.baseUrl) found.push(...urlSecrets(spec.baseUrl));
  return found;
}

/** A key with a stray space or line break around or in it: what a copy from a file or a terminal often brings. */
export function strayWhitespace(key: string): boolean {
  return key !== key.trim() || /[\r\n\t]/.test(key);
}

/** An option name that says its value is a credential, at any depth of a factory's settings. */
export const CREDENTIAL_OPTION = /key|token|secret|password|passwd|credential|private|auth|cert|signature|session/i;

/** An option name that says its value is a URL (whose user, password and key-like parameters are credentials). */
export const URL_OPTION = /(^|_)(base_?)?ur[li]$|endpoint/i;

/**
 * The credentials in a factory's settings, however deep: every string under an option
 * named like a credential, header values but the harmless ones (under any `headers`), and
 * URLs' credentials.
 */
export function optionSecrets(value: unknown, name = '', depth = 0): string[] {
  if (depth > 16) return [];
  if (typeof value === 'string') {
    if (CREDENTIAL_OPTION.test(name)) return headerSecrets(value);
    if (URL_OPTION.test(name)) return urlSecrets(value);
    return [];
  }
  if (value === null || typeof value !== 'object') return [];
  const found: string[] = [];
  const headers = /^headers$/i.test(name);
  for (const [key, inner] of Object.entries(value as Record<string, unknown>)) {
    if (headers && typeof inner === 'string') {
      if (!isHarmlessHeader(key)) found.push(...headerSecrets(inner));
      continue;
    }
    // Everything under a credential's name is one: a service account's fields, say.
    found.push(...optionSecrets(inner, CREDENTIAL_OPTION.test(name) ? name : key, depth + 1));
  }
  return found;
}

/**
 * An AI SDK spec's secrets: its key (given, or read from its variable), and the
 * credentials in its factory's settings (see {@link optionSecrets}).
 */
function aiSdkSecrets(spec: AiSdkProviderSpec, env: NodeJS.ProcessEnv): string[] {
  const found: string[] = [];
  if (spec.apiKey) found.push(spec.apiKey);
  else if (spec.apiKeyEnv && env[spec.apiKeyEnv]) found.push(env[spec.apiKeyEnv] as string);
  // Neither: the package reads a variable of its own choosing (OPENAI_API_KEY,
  // GOOGLE_GENERATIVE_AI_API_KEY, AWS_SECRET_ACCESS_KEY...): every variable named like one is held.
  else
    for (const [name, value] of Object.entries(env))
      if (CREDENTIAL_VARIABLE.test(name) && typeof value === 'string') found.push(value);
  found.push(...optionSecrets(spec.options ?? {}));
  return found;
}

/** An environment variable's name that says it holds a credential. */
const CREDENTIAL_VARIABLE =
  /(^|_)(API_?KEY|ACCESS_KEY(_ID)?|SECRET(_ACCESS_KEY|_KEY)?|(SESSION|AUTH|OIDC|ACCESS|BEARER)_TOKEN|TOKEN|PASSWORD|PRIVATE_KEY)$/i;

/** A URL's user name and password, and the values of its key-like query parameters (decoded and as written). */
export function urlSecrets(url: string, options: { user?: boolean } = {}): string[] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [];
  }
  const found: string[] = [];
  const add = (raw: string) => {
    if (raw === '') return;
    found.push(raw);
    const decoded = safeDecode(raw);
    if (decoded !== raw) found.push(decoded);
  };
  if (options.user !== false) add(parsed.username);
  add(parsed.password);
  for (const [name, value] of parsed.searchParams) if (isKeyLikeName(name) && value !== '') found.push(value);
  // As written too: `?api_key=a%2Bb` holds `a+b`, and the text may carry either spelling.
  for (const part of parsed.search.slice(1).split('&')) {
    const at = part.indexOf('=');
    if (at > 0 && isKeyLikeName(safeDecode(part.slice(0, at))) && at < part.length - 1) found.push(part.slice(at + 1));
  }
  return found;
}

/** A URL with its user name and password, and its key-like query parameters' values, replaced by {@link MASK}. */
export function maskedUrl(url: string, options: { user?: boolean } = {}): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  let changed = false;
  if (parsed.username && options.user !== false) {
    parsed.username = MASK;
    changed = true;
  }
  if (parsed.password) {
    parsed.password = MASK;
    changed = true;
  }
  if (parsed.search) {
    const parts = parsed.search
      .slice(1)
      .split('&')
      .map((part) => {
        const at = part.indexOf('=');
        if (at <= 0 || at === part.length - 1 || !isKeyLikeName(safeDecode(part.slice(0, at)))) return part;
        changed = true;
        return `${part.slice(0, at)}=${MASK}`;
      });
    parsed.search = parts.join('&');
  }
  // A URL with nothing to hide is handed back as written, not as URL would spell it.
  return changed ? parsed.toString() : url;
}

/** `key = value` pairs of a libpq key/value connection string; a value may be single-quoted (`\'` and `\\` escaped). */
const KEY_VALUE = /([A-Za-z_][\w-]*)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)/g;

/** Whether a string is a connection string in key/value form (`host=h dbname=d ...`) rather than a URL. */
export function isKeyValueConnection(text: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(text.trim()) && /^\s*[A-Za-z_][\w-]*\s*=/.test(text);
}

/**
 * The passwords a database connection string holds: a URL's password and its key-like
 * query parameters (`?password=`, `?sslpassword=`), or in key/value form the value of every
 * key-like key, quoted or not. The user name is not a secret here.
 */
export function connectionSecrets(connection: string): string[] {
  if (typeof connection !== 'string') return [];
  if (!isKeyValueConnection(connection)) return urlSecrets(connection, { user: false });
  const found: string[] = [];
  for (const match of connection.matchAll(KEY_VALUE)) {
    const [, key, raw] = match as unknown as [string, string, string];
    if (!isKeyLikeName(key) || raw === '' || raw === "''") continue;
    if (raw.startsWith("'")) {
      const inner = raw.slice(1, -1);
      found.push(inner);
      const unescaped = inner.replace(/\\(.)/g, '$1');
      if (unescaped !== inner) found.push(unescaped);
    } else found.push(raw);
  }
  return found;
}

/** A connection string with its passwords replaced by {@link MASK}, in URL or key/value form. */
export function maskedConnection(connection: string): string {
  if (!isKeyValueConnection(connection)) return maskedUrl(connection, { user: false });
  return connection.replace(KEY_VALUE, (whole, key: string) => (isKeyLikeName(key) ? `${key}=${MASK}` : whole));
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** The spellings a value may take in text: as it is, URL-encoded, and JSON-escaped (once and twice). */
function spellings(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const encoded = encodeURIComponent(value);
  return [...new Set([value, encoded, encoded.replace(/%20/g, '+'), json, JSON.stringify(json).slice(1, -1)])];
}

/** This thread's secrets, as held: the values, and every spelling scrubbed. */
const held = new Set<string>();
const spelled = new Set<string>();
let pattern: RegExp | null = null;
const listeners = new Set<(values: readonly string[]) => void>();

/**
 * Holds `values` as secrets in this thread from now on: every scrub here replaces them.
 * Values shorter than {@link MIN_SECRET_LENGTH} are ignored. Returns the values newly held.
 */
export function holdSecrets(values: Iterable<string | null | undefined>): string[] {
  const added: string[] = [];
  for (const value of values) {
    if (typeof value !== 'string' || value.length < MIN_SECRET_LENGTH || held.has(value)) continue;
    held.add(value);
    added.push(value);
    for (const spelling of spellings(value)) spelled.add(spelling);
  }
  if (added.length > 0) {
    pattern = null;
    for (const listener of listeners) listener(added);
  }
  return added;
}

/** Every value held in this thread (to hand to another thread that writes for it). */
export function heldSecrets(): string[] {
  return [...held];
}

/** Calls `listener` with every value held from now on; returns the unsubscribe. */
export function onSecretsHeld(listener: (values: readonly string[]) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function currentPattern(): RegExp | null {
  if (spelled.size === 0) return null;
  if (pattern === null) {
    // Longest first: a value that contains another is replaced whole.
    const alternatives = [...spelled]
      .sort((a, b) => b.length - a.length)
      .map((spelling) => spelling.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    pattern = new RegExp(alternatives.join('|'), 'g');
  }
  return pattern;
}

/** `text` with every held secret, in every spelling, replaced by {@link MASK}. */
export function scrubText(text: string): string {
  const found = currentPattern();
  if (found === null || typeof text !== 'string' || text.length < MIN_SECRET_LENGTH) return text;
  if (!holdsSecret(text, found)) return text;
  found.lastIndex = 0;
  return text.replace(found, MASK);
}

/** Spellings past which one pass of the pattern beats a search for each (see {@link holdsSecret}). */
const SEARCHED_ONE_BY_ONE = 16;

/**
 * Whether `text` holds a secret. Every string of every store write is asked (the store
 * actor's hot path), and nearly all hold none: for the few spellings a process usually
 * holds, a plain search for each is several times faster than the alternation's one pass.
 */
function holdsSecret(text: string, found: RegExp): boolean {
  if (spelled.size <= SEARCHED_ONE_BY_ONE) {
    for (const spelling of spelled) if (text.includes(spelling)) return true;
    return false;
  }
  found.lastIndex = 0;
  return found.test(text);
}

/**
 * `value` with every string in it scrubbed (object keys too), through arrays and plain
 * objects; errors in it are scrubbed in place. What changed is copied, the rest shared;
 * the value given is never modified. Bytes (a Uint8Array) are left as they are.
 */
export function scrubValue<T>(value: T): T {
  if (currentPattern() === null) return value;
  return scrubDeep(value, new Map()) as T;
}

function scrubDeep(value: unknown, seen: Map<object, unknown>): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (typeof value !== 'object' || value === null) return value;
  const known = seen.get(value);
  if (known !== undefined) return known;
  if (value instanceof Error) return scrubError(value, seen);
  if (Array.isArray(value)) {
    seen.set(value, value);
    let copy: unknown[] | null = null;
    value.forEach((item, index) => {
      const scrubbed = scrubDeep(item, seen);
      if (scrubbed !== item) {
        copy ??= value.slice();
        copy[index] = scrubbed;
      }
    });
    seen.set(value, copy ?? value);
    return copy ?? value;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  seen.set(value, value);
  let copy: Record<string, unknown> | null = null;
  const entries = Object.entries(value as Record<string, unknown>);
  for (const [key, item] of entries) {
    const name = scrubText(key);
    const scrubbed = scrubDeep(item, seen);
    if (name !== key || scrubbed !== item) {
      if (copy === null) {
        copy = prototype === null ? Object.create(null) : {};
        for (const [k, v] of entries) (copy as Record<string, unknown>)[k] = v;
      }
      if (name !== key) delete (copy as Record<string, unknown>)[key];
      (copy as Record<string, unknown>)[name] = scrubbed;
    }
  }
  seen.set(value, copy ?? value);
  return copy ?? value;
}

/**
 * Scrubs an error in place and returns it: its message, stack, every own property (a
 * HarnessError's details, a ProviderError's responseBody) and its causes.
 */
export function scrubError<T>(error: T, seen: Map<object, unknown> = new Map()): T {
  if (currentPattern() === null || typeof error !== 'object' || error === null) return error;
  if (seen.has(error)) return error;
  seen.set(error, error);
  const target = error as unknown as Record<string, unknown>;
  for (const name of new Set(['message', 'stack', 'cause', ...Object.keys(target)])) {
    let current: unknown;
    try {
      current = target[name];
    } catch {
      continue;
    }
    const scrubbed = current instanceof Error ? scrubError(current, seen) : scrubDeep(current, seen);
    if (scrubbed === current) continue;
    try {
      Object.defineProperty(target, name, { value: scrubbed, writable: true, configurable: true });
    } catch {
      // A property that cannot be redefined is left; its value is the error's own.
    }
  }
  return error;
}
