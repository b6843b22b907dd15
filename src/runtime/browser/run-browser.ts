/**
 * The browser of one run: Debian's (or the host's) Chromium, driven by playwright-core over
 * a pipe (no debugging port), started at the first browser call, ended with the run.
 *
 * It runs on an executor of its own, wrapped for the bubblewrap rung in the system's view
 * (the programs and libraries read-only, its own temporary directory and home, and nothing
 * of the workspace, the writable roots or any host daemon's socket), with its profile in
 * that temporary directory, no network but the run's egress proxy
 * (every connection decided there: the policy's `net` rules, the address floor, the
 * approver), and its pipe to the harness the only descriptors it keeps. Every request the
 * page makes is also seen paused, before it leaves: a scheme other than http(s), a host
 * below the floor and one the policy denies are refused there, and the refusal recorded
 * by the rule that made it; redirects, which are not paused, are each a connection the
 * proxy decides. No browser starts where the run cannot be contained so.
 */

import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, ConsoleMessage, Page, Route, WebSocketRoute } from 'playwright-core';
import { ErrorCode, HarnessError } from '../../errors.js';
import { checkHost, floorLifted } from '../exec/containment/address-floor.js';
import type { SandboxData } from '../exec/containment/boundary.js';
import { type ContainedExecutor, RELAY_PORT, runDirectory } from '../exec/containment/contained.js';
import type { CommandOrigin, EgressGate } from '../exec/containment/proxy.js';
import { requiredOnFirstUse } from '../lazy-require.js';
import type { Policy } from '../policy/policy.js';
import { type BrowserData, browserSwitches, findChromium, temporaryTooLong } from './browser.js';

const playwright = requiredOnFirstUse<typeof import('playwright-core')>('playwright-core');

/** The most lines of console output and page errors kept between two calls. */
const MAX_NOTES = 50;
/** The most characters of one such line. */
const MAX_NOTE_CHARS = 500;

/**
 * What the run's browser runs on, made at the first call: its executor, the environment
 * its commands get, and the egress proxy's address inside its network namespace; or why
 * there can be none.
 */
export type BrowserOpened =
  | { executor: ContainedExecutor; env: NodeJS.ProcessEnv; proxy: string; anchor: string }
  | string;

/**
 * What the browser's executor is granted: nothing of the workspace (its root is an empty
 * directory of its own, read-only), no writable root, the bubblewrap rung by name, and no
 * caps of the run's (a memory or process limit without a cgroup is an rlimit, under which
 * Chromium cannot start; the run's wall clock and each call's deadline hold it).
 */
export const BROWSER_SANDBOX: SandboxData = {
  access: 'read-only',
  writableRoots: [],
  rung: 'bubblewrap',
  caps: {},
  sharedCaches: false,
};

/**
 * The browser's executor, made by `make` on an empty directory of its own, or why there
 * can be none: only on the bubblewrap rung with the egress proxy the only way out, where
 * the browser's view of the machine is narrowed to the system's directories and its own,
 * and every connection it makes is decided at the proxy, redirects included.
 */
export function openBrowser(
  make: ((anchor: string) => ContainedExecutor) | null,
  env: NodeJS.ProcessEnv,
): BrowserOpened {
  if (!make)
    return "this run's executor was handed in, and a browser cannot be started under it; run without ports.executor to use withBrowser().";
  // Removed with the browser, or swept like a run's directories when its process was killed.
  const anchor = runDirectory();
  let executor: ContainedExecutor;
  try {
    executor = make(anchor);
  } catch (error) {
    rmSync(anchor, { recursive: true, force: true });
    if (HarnessError.isInstance(error) && error.code === ErrorCode.ContainmentUnavailable)
      return `the browser cannot start: it runs only contained by bubblewrap, and ${error.message}`;
    throw error;
  }
  const report = executor.contained?.();
  if (report?.network === 'none') {
    void executor.close();
    rmSync(anchor, { recursive: true, force: true });
    return "the browser cannot start: the policy lets the run reach no host; allow the hosts its pages may come from (Policy's allowNet, or a rule of kind 'net').";
  }
  if (report?.rung !== 'bubblewrap' || report.network !== 'proxy') {
    void executor.close();
    rmSync(anchor, { recursive: true, force: true });
    return `the browser cannot start: it runs only contained by bubblewrap with the run's egress proxy as its only way out, and here its commands would be on the ${report?.rung ?? 'floor'} rung with network ${report?.network ?? 'not established'}.`;
  }
  return { executor, env, proxy: `http://127.0.0.1:${RELAY_PORT}`, anchor };
}

/** A URL a page asked for, decided: null when it may go on, else why not, by rule and layer. */
export type UrlVerdict = null | { rule: string; layer: string; reason: string };

/** The ports of the schemes a page may reach, when a URL names none. */
const PORTS: Record<string, number> = { 'http:': 80, 'https:': 443, 'ws:': 80, 'wss:': 443 };

/**
 * The rule by which the run's egress proxy refused the request this is the answer to, or
 * null: the proxy answers a refused plain-HTTP request itself, 403 with the rule in a
 * header of its own (an HTTPS one fails to connect instead, which the call reports).
 */
export function proxyRefusal(response: { status(): number; headers(): Record<string, string> }): string | null {
  return response.status() === 403 ? (response.headers()['x-io-harness-rule'] ?? null) : null;
}

export class RunBrowser {
  readonly data: BrowserData;
  readonly #root: string;
  readonly #policy: Policy | null;
  readonly #gate: EgressGate;
  readonly #open: () => BrowserOpened;
  #opened: BrowserOpened | undefined;
  #browser: Browser | null = null;
  #page: Page | null = null;
  #starting: Promise<Page> | null = null;
  #closed = false;
  /** Browsers started so far: each launch gets a profile of its own. */
  #launches = 0;
  /** The refusals recorded so far, by rule and host: each is recorded once, however often a page asks. */
  readonly #recorded = new Set<string>();
  /** The console's lines, the page's uncaught errors and the requests refused, since the last call took them. */
  #notes: string[] = [];
  /** The tool call under way, that a refusal is recorded against. */
  origin: CommandOrigin | null = null;

  /** Where the run can write (its workspace, its writable roots): no browser is run from there. */
  readonly #untrusted: readonly string[];

  constructor(
    data: BrowserData,
    root: string,
    policy: Policy | null,
    gate: EgressGate,
    open: () => BrowserOpened,
    untrusted: readonly string[] = [root],
  ) {
    this.data = data;
    this.#root = root;
    this.#untrusted = untrusted;
    this.#policy = policy;
    this.#gate = gate;
    this.#open = open;
  }

  get timeoutMs(): number {
    return this.data.timeoutSecs * 1000;
  }

  /** Why no browser can be used in this run (or any more), or null. */
  get whyNot(): string | null {
    if (this.#closed) return 'the run has ended: its browser was closed.';
    this.#opened ??= this.#open();
    return typeof this.#opened === 'string' ? this.#opened : null;
  }

  /**
   * A URL the page (or the model) asks for, decided as the proxy would, before it leaves:
   * http(s) and ws(s) only (about:blank is no request), the floor on the host as written,
   * then the policy's `net` rules. An `ask` goes on to the proxy, which puts it to the
   * approver when the connection is made, only for what the model itself navigates to
   * (`navigation`): a page's own requests to a host the policy asks about are refused, so
   * a page cannot put questions of its choosing to a person. A refusal is recorded.
   */
  check(url: string, navigation = true): UrlVerdict {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return this.#refused(url, { rule: 'browser.url', layer: 'runtime', reason: `${url} is not a URL` });
    }
    const port = PORTS[parsed.protocol];
    if (port === undefined)
      return this.#refused(url, {
        rule: 'browser.scheme',
        layer: 'runtime',
        reason: `a ${parsed.protocol} URL: the browser reaches http and https pages only (and about:blank)`,
      });
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    const target = { host, port: parsed.port === '' ? port : Number(parsed.port) };
    if (!floorLifted()) {
      const floor = checkHost(host);
      if (!floor.ok)
        return this.#refused(url, { rule: floor.rule, layer: 'address-floor', reason: floor.reason }, target);
    }
    if (this.#policy) {
      const decision = this.#policy.decide({ kind: 'net', host, port: target.port }, this.#root);
      if (decision.effect === 'deny')
        return this.#refused(
          url,
          { rule: decision.rule ?? 'policy', layer: decision.layer ?? 'policy', reason: decision.reason },
          target,
        );
      if (decision.effect === 'ask' && !navigation)
        return this.#refused(
          url,
          {
            rule: 'browser.ask',
            layer: 'runtime',
            reason: `the policy asks about ${decision.subject} (rule ${decision.rule}), and a page's own request is not put to a person: allow the host to let pages load from it`,
          },
          target,
        );
    }
    return null;
  }

  #refused(url: string, verdict: NonNullable<UrlVerdict>, target = { host: url, port: 0 }): UrlVerdict {
    const key = `${verdict.rule}|${target.host}:${target.port}`;
    if (!this.#recorded.has(key)) {
      this.#recorded.add(key);
      this.#gate.refused(target, { ok: false, ...verdict }, this.origin);
    }
    this.#note(`refused: ${url.slice(0, 200)} (${verdict.rule}, ${verdict.layer}: ${verdict.reason})`);
    return verdict;
  }

  #note(line: string): void {
    if (this.#notes.length >= MAX_NOTES) return;
    this.#notes.push(line.length > MAX_NOTE_CHARS ? `${line.slice(0, MAX_NOTE_CHARS)}…` : line);
    if (this.#notes.length === MAX_NOTES) this.#notes.push('(more console output was left out)');
  }

  /** What the page said (its console, its uncaught errors) and what was refused, since the last call; then forgotten. */
  takeNotes(): string[] {
    return this.#notes.splice(0);
  }

  /** The page, the browser started for it at the first call. Throws, saying why, where it cannot start. */
  async page(): Promise<Page> {
    const why = this.whyNot;
    if (why !== null) throw new Error(why);
    if (this.#page && !this.#page.isClosed()) return this.#page;
    this.#starting ??= this.#start().finally(() => {
      this.#starting = null;
    });
    return this.#starting;
  }

  async #start(): Promise<Page> {
    const browser = this.#browser?.isConnected() ? this.#browser : await this.#launch();
    if (this.#closed) throw new Error('the run has ended: its browser was closed.');
    const context = await browser.newContext({
      acceptDownloads: false,
      serviceWorkers: 'block',
      viewport: { width: 1280, height: 800 },
    });
    context.setDefaultTimeout(this.timeoutMs);
    context.setDefaultNavigationTimeout(this.timeoutMs);
    await context.route('**/*', (route) => this.#route(route));
    await context.routeWebSocket(/.*/, (socket) => this.#socket(socket));
    const page = await context.newPage();
    page.on('console', (message: ConsoleMessage) => this.#note(`console.${message.type()}: ${message.text()}`));
    page.on('pageerror', (error: Error) => this.#note(`uncaught error: ${error.message}`));
    // A connection the egress proxy refused (a redirect to a host the policy denies, say): its answer says by which rule.
    page.on('response', (response) => {
      const rule = proxyRefusal(response);
      if (rule !== null) this.#note(`refused by the egress proxy: ${response.url().slice(0, 200)} (rule ${rule})`);
    });
    // A page that crashed (out of memory, killed at a cap) is left: the next call opens a new one.
    page.on('crash', () => {
      this.#note('the page crashed; the next browser call opens a new, blank one');
      if (this.#page === page) this.#page = null;
      void context.close().catch(() => undefined);
    });
    // One page: a window a page opens is closed, and said so.
    context.on('page', (other: Page) => {
      if (other === page) return;
      this.#note(`a page opened another window (${other.url()}); it was closed: the browser keeps one page`);
      void other.close().catch(() => undefined);
    });
    this.#page = page;
    return page;
  }

  /** Chromium started, wrapped for its rung, with a profile of its own in its temporary directory. */
  async #launch(): Promise<Browser> {
    const opened = this.#opened as Exclude<BrowserOpened, string>;
    const found = findChromium(this.data, opened.env.PATH ?? process.env.PATH, this.#untrusted);
    if ('missing' in found) throw new Error(`the browser cannot start: ${found.missing}.`);
    const own = opened.executor.boundary().tmp;
    const tooLong = temporaryTooLong(own);
    if (tooLong) throw new Error(`the browser cannot start: ${tooLong}.`);
    const profile = join(own, `browser-profile-${++this.#launches}`);
    // It works in its own directory: the anchor, read-only, is not in its view.
    const wrapped = opened.executor.wrapCommand(
      [found.path, ...browserSwitches(profile, opened.proxy)],
      own,
      opened.env,
      {
        passFds: 2,
        systemView: true,
      },
    );
    const [program, ...args] = wrapped.argv as [string, ...string[]];
    const browser = await playwright().chromium.launch({
      executablePath: program,
      args,
      ignoreDefaultArgs: true,
      env: wrapped.env,
      timeout: this.timeoutMs,
      // The run ends it; a signal to the harness's process is the embedder's to handle.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
    // A browser that went away (killed at a cap, crashed) is started again at the next call.
    browser.on('disconnected', () => {
      if (this.#browser !== browser) return;
      this.#browser = null;
      this.#page = null;
      this.#note('the browser went away; the next browser call starts it again, on a blank page');
    });
    this.#browser = browser;
    if (this.#closed) await browser.close().catch(() => undefined);
    return browser;
  }

  async #route(route: Route): Promise<void> {
    const request = route.request();
    const navigation = request.isNavigationRequest() && request.frame() === this.#page?.mainFrame();
    const verdict = this.check(request.url(), navigation);
    if (verdict) await route.abort('blockedbyclient').catch(() => undefined);
    else await route.continue().catch(() => undefined);
  }

  #socket(socket: WebSocketRoute): void {
    const verdict = this.check(socket.url(), false);
    if (verdict) void socket.close({ code: 1008, reason: `refused by ${verdict.rule}` }).catch(() => undefined);
    else socket.connectToServer();
  }

  /** Ends the browser (every process of it) and what it ran on. */
  async close(): Promise<void> {
    this.#closed = true;
    const starting = this.#starting;
    if (starting) await starting.catch(() => undefined);
    const browser = this.#browser;
    this.#browser = null;
    this.#page = null;
    // Closed, or killed by playwright once its own bound passes: not left behind the run.
    if (browser) await browser.close().catch(() => undefined);
    const opened = this.#opened;
    if (opened && typeof opened !== 'string') {
      await opened.executor.close().catch(() => undefined);
      rmSync(opened.anchor, { recursive: true, force: true });
    }
  }
}
