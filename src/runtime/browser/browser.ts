/**
 * A browser for the model (`TaskContract.withBrowser`, `[browser]` in the user's io.toml):
 * what a contract asks for, checked, and the host's Chromium, found (never downloaded).
 * The run's browser itself is ./run-browser.ts; its tools are ../tools/families/browser.ts.
 */
import { accessSync, constants, readFileSync, realpathSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { InvalidArgumentError } from '../../errors.js';
import { SYSTEM_DIRS } from '../exec/containment/rungs.js';
import { isWithin, writableByRun } from '../exec/find-program.js';

/** What `withBrowser` takes. */
export interface BrowserOptions {
  /** The Chromium to run, by its absolute path; found on the host when not given (never downloaded). */
  executable?: string;
  /** How long one browser tool call may take, in seconds. Default 30. */
  timeoutSecs?: number;
}

/** A contract's browser settings, checked, as stored with the run. */
export interface BrowserData {
  executable?: string;
  timeoutSecs: number;
}

export const DEFAULT_BROWSER_TIMEOUT_SECS = 30;

/** Checks what `withBrowser` (or `[browser]`) was given; the defaults filled in. */
export function checkBrowserOptions(options: BrowserOptions | undefined): BrowserData {
  const given = options ?? {};
  if (typeof given !== 'object' || Array.isArray(given))
    throw new InvalidArgumentError('withBrowser takes { executable, timeoutSecs }.');
  for (const key of Object.keys(given))
    if (key !== 'executable' && key !== 'timeoutSecs')
      throw new InvalidArgumentError(
        `withBrowser: unknown option ${JSON.stringify(key)}; the options are executable, timeoutSecs.`,
      );
  const data: BrowserData = { timeoutSecs: DEFAULT_BROWSER_TIMEOUT_SECS };
  if (given.executable !== undefined) {
    if (typeof given.executable !== 'string' || !isAbsolute(given.executable))
      throw new InvalidArgumentError(
        `withBrowser: executable is the absolute path of a Chromium, such as /usr/lib/chromium/chromium; got ${JSON.stringify(given.executable)}.`,
      );
    data.executable = given.executable;
  }
  if (given.timeoutSecs !== undefined) {
    if (typeof given.timeoutSecs !== 'number' || !(given.timeoutSecs > 0) || given.timeoutSecs > 600)
      throw new InvalidArgumentError(
        `withBrowser: timeoutSecs is how long one browser call may take, in seconds, above 0 and at most 600; got ${JSON.stringify(given.timeoutSecs)}.`,
      );
    data.timeoutSecs = given.timeoutSecs;
  }
  return data;
}

/** The names a Chromium goes by on a PATH, most specific first. */
const NAMES = ['chromium', 'chromium-browser'];
/** Where distributions keep the browser itself, behind a launcher script on the PATH. */
const BEHIND_LAUNCHERS = [
  '/usr/lib/chromium/chromium',
  '/usr/lib/chromium-browser/chromium-browser',
  '/opt/google/chrome/chrome',
];

/**
 * Whether the browser at `path` may be run: it is in the browser's view (the system's
 * directories: nothing else is there) and nowhere the run can write (`untrusted`: its
 * workspace and writable roots), by its real path, so no run can put a program of its own
 * in a browser's place.
 */
function trusted(path: string, untrusted: readonly string[]): boolean {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return false;
  }
  return SYSTEM_DIRS.some((dir) => isWithin(real, dir)) && writableByRun(real, untrusted) === null;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Whether `path` is a script (a launcher) rather than the browser: it starts with `#!`. */
function script(path: string): boolean {
  try {
    return readFileSync(path, { encoding: 'latin1', flag: 'r' }).startsWith('#!');
  } catch {
    return false;
  }
}

/**
 * The Chromium to run: the one named, else the browser behind a distribution's launcher
 * (Debian's /usr/bin/chromium is a shell script that exits when it cannot read what it
 * wants of the host), else the first `chromium` or `chromium-browser` on PATH that is not
 * a launcher script. Only one in the system's directories (its view) and nowhere the run
 * can write (`untrusted`) is chosen. Null, with why, when there is none.
 */
export function findChromium(
  data: BrowserData,
  path = process.env.PATH ?? '',
  untrusted: readonly string[] = [],
): { path: string } | { missing: string } {
  if (data.executable !== undefined) {
    if (!executable(data.executable))
      return { missing: `the browser named in withBrowser, ${data.executable}, is not an executable file` };
    if (!trusted(data.executable, untrusted))
      return {
        missing: `the browser named in withBrowser, ${data.executable}, is not in the system's directories (${SYSTEM_DIRS.join(', ')}) or is where the run can write; the browser sees nothing else`,
      };
    return { path: data.executable };
  }
  for (const candidate of BEHIND_LAUNCHERS)
    if (executable(candidate) && trusted(candidate, untrusted)) return { path: candidate };
  for (const dir of path.split(delimiter).filter((entry) => isAbsolute(entry)))
    for (const name of NAMES) {
      const candidate = join(dir, name);
      if (executable(candidate) && !script(candidate) && trusted(candidate, untrusted)) return { path: candidate };
    }
  return {
    missing:
      'no Chromium was found in the system’s directories (it is never downloaded): install the distribution’s (apt install chromium) or name one with withBrowser({ executable })',
  };
}

/** The longest path a UNIX socket can be bound to: sun_path's 108 bytes, less its terminating NUL. */
const SOCKET_PATH_MAX = 107;
/**
 * What Chromium adds to its temporary directory for its single-instance socket:
 * `/org.chromium.Chromium.` and six random characters, then `/SingletonSocket`. Measured
 * with Debian's Chromium, which starts with a 62-byte directory and not a 63-byte one.
 * Google Chrome's name for it is 4 bytes shorter, so for Chrome the check is 4 bytes on
 * the safe side.
 */
const SINGLETON_TAIL = '/org.chromium.Chromium.'.length + 6 + '/SingletonSocket'.length;

/**
 * Why Chromium cannot start with `tmp` as its temporary directory, or null when it can: it
 * binds its single-instance socket under it and exits at once when that path is longer
 * than a UNIX socket allows (playwright then reports only that the browser closed).
 */
export function temporaryTooLong(tmp: string): string | null {
  const over = Buffer.byteLength(tmp) + SINGLETON_TAIL - SOCKET_PATH_MAX;
  if (over <= 0) return null;
  return `Chromium binds a socket under the run's temporary directory (${tmp}), and that path would be ${over} bytes longer than a UNIX socket allows; run the harness with TMPDIR set to a directory whose path is at least ${over} bytes shorter (/tmp, say)`;
}

/**
 * The switches the browser runs with: headless, its profile where the run's temporary
 * directory is, every request through the run's egress proxy (loopback too), and nothing
 * it would fetch on its own (updates, field trials, metrics, sign-in, search preconnects).
 */
export function browserSwitches(profile: string, proxy: string | null): string[] {
  const quiet = [
    'OptimizationHints',
    'NetworkTimeServiceQuerying',
    'MediaRouter',
    'Translate',
    'AutofillServerCommunication',
    'CertificateTransparencyComponentUpdater',
    'InterestFeedContentSuggestions',
    'PreconnectToSearch',
    'AimEnabled',
    'LensOverlay',
    'HttpsUpgrades',
    'HttpsFirstBalancedModeAutoEnable',
  ];
  return [
    '--headless',
    `--user-data-dir=${profile}`,
    '--remote-debugging-pipe',
    '--no-startup-window',
    // The run's containment is its sandbox: Chromium's own needs privileges its wrapping takes away.
    '--no-sandbox',
    '--disable-dev-shm-usage',
    '--hide-scrollbars',
    '--mute-audio',
    '--no-first-run',
    '--no-default-browser-check',
    '--disable-default-apps',
    '--disable-extensions',
    '--disable-component-update',
    '--disable-component-extensions-with-background-pages',
    '--disable-background-networking',
    '--disable-field-trial-config',
    '--disable-breakpad',
    '--disable-sync',
    '--disable-domain-reliability',
    '--disable-client-side-phishing-detection',
    '--no-pings',
    '--dns-prefetch-disable',
    '--metrics-recording-only',
    '--password-store=basic',
    '--use-mock-keychain',
    '--no-service-autorun',
    '--disable-search-engine-choice-screen',
    '--force-color-profile=srgb',
    // No GPU and no WebGL (with Chromium's own sandbox off, less of it a page can reach), and no JIT.
    '--disable-gpu',
    '--disable-3d-apis',
    '--js-flags=--jitless',
    `--disable-features=${quiet.join(',')}`,
    // WebRTC may not reach past the proxy with UDP of its own.
    '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
    ...(proxy ? [`--proxy-server=${proxy}`, '--proxy-bypass-list=<-loopback>'] : []),
  ];
}
