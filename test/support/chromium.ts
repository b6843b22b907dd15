/**
 * The Chromium the browser tests drive with playwright-core: the host's own (Debian's
 * `chromium`) where it has one; else the headless shell the `@sparticuz/chromium` package
 * ships (a dev dependency, x64 Linux), unpacked once into node_modules/.cache with the
 * NSS libraries and fonts it brings, so a fresh machine needs nothing installed by hand.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createBrotliDecompress } from 'node:zlib';
import { type Browser, chromium } from 'playwright-core';

const HOST = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];
const PACKAGE = '@sparticuz/chromium';
const CACHE = fileURLToPath(new URL('../../node_modules/.cache/io-harness-chromium/', import.meta.url));

/** A Chromium to launch: where it is, what it is, and what it needs beside playwright's own arguments. */
export interface TestChromium {
  source: 'host' | 'packaged';
  executablePath: string;
  /** Its version as it says it (the host's), or the package's. */
  version: string;
  args: string[];
  /** Added to the environment it is launched with. */
  env: Record<string, string>;
}

/** The host's Chromium, or the packaged one (unpacked on first use); throws, saying why, when there is neither. */
export async function testChromium(): Promise<TestChromium> {
  const host = HOST.find((path) => existsSync(path));
  if (host) {
    const said = spawnSync(host, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    const version = said.stdout?.trim() || 'version unknown';
    return { source: 'host', executablePath: host, version, args: ['--no-sandbox'], env: {} };
  }
  return packagedChromium();
}

/** That Chromium, launched headless for a test (which closes it). */
export async function launchChromium(): Promise<Browser> {
  const found = await testChromium();
  return chromium.launch({
    executablePath: found.executablePath,
    args: found.args,
    env: { ...process.env, ...found.env },
  });
}

/** The line the run prints to say which Chromium its browser tests use. */
export function describeChromium(chromium: TestChromium): string {
  return chromium.source === 'host'
    ? `Chromium: host ${chromium.executablePath} (${chromium.version})`
    : `Chromium: packaged ${PACKAGE} ${chromium.version} (${chromium.executablePath})`;
}

async function packagedChromium(): Promise<TestChromium> {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(PACKAGE);
  } catch {
    throw new Error(
      `no Chromium at ${HOST.join(' or ')}, and ${PACKAGE} is not installed: run npm install, or install Chromium (apt-get install -y chromium)`,
    );
  }
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`no Chromium at ${HOST.join(' or ')}, and ${PACKAGE} ships one for x64 Linux only`);
  const root = join(dirname(entry), '..');
  const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const dir = join(CACHE, version);
  if (!existsSync(dir)) await unpack(join(root, 'bin'), dir);
  return {
    source: 'packaged',
    executablePath: join(dir, 'chromium'),
    version,
    args: ['--no-sandbox', '--no-zygote'],
    env: {
      // Its NSS and expat, which a bare host lacks; the host's own libraries after them.
      LD_LIBRARY_PATH: [join(dir, 'lib'), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
      FONTCONFIG_PATH: join(dir, 'fonts'),
    },
  };
}

/**
 * Unpacks the package's brotli files into `dir`: into a directory of this process's
 * first, renamed into place whole, so a run beside this one never sees half of it.
 */
async function unpack(bin: string, dir: string): Promise<void> {
  const partial = `${dir}.${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(join(partial, 'fonts'), { recursive: true });
  try {
    await pipeline(
      createReadStream(join(bin, 'chromium.br')),
      createBrotliDecompress(),
      createWriteStream(join(partial, 'chromium'), { mode: 0o755 }),
    );
    // al2023 holds lib/ (NSS, NSPR, expat); fonts holds fonts/ and a fonts.conf naming /tmp, replaced below.
    await untar(join(bin, 'al2023.tar.br'), partial);
    await untar(join(bin, 'fonts.tar.br'), join(partial, 'fonts'));
    writeFileSync(
      join(partial, 'fonts', 'fonts.conf'),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n  <dir>${join(dir, 'fonts', 'fonts')}</dir>\n  <cachedir>${join(dir, 'fonts-cache')}</cachedir>\n</fontconfig>\n`,
    );
    try {
      renameSync(partial, dir);
    } catch (error) {
      // Another run put it in place first: theirs is whole too.
      if (!existsSync(dir)) throw error;
    }
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
}

/** A brotli-compressed tar file, unpacked into `dir` by the system's tar. */
async function untar(file: string, dir: string): Promise<void> {
  const tar = spawn('tar', ['-x', '-f', '-', '-C', dir], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  tar.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    tar.once('error', reject);
    tar.once('close', resolve);
  });
  // tar stops reading at the archive's end marker and exits, closing its input while the
  // padding after the marker is still being written: that early close is not a failure
  // when tar says it unpacked everything.
  const written = pipeline(createReadStream(file), createBrotliDecompress(), tar.stdin).then(
    () => null,
    (error: Error) => error,
  );
  const [status, failure] = await Promise.all([exited, written]);
  if (status !== 0) throw new Error(`tar could not unpack ${file} (${status}): ${stderr}`);
  const cut = failure as NodeJS.ErrnoException | null;
  if (cut && cut.code !== 'ERR_STREAM_PREMATURE_CLOSE' && cut.code !== 'EPIPE') throw cut;
}
