/**
 * A link an agent plants at a guidance file name (AGENTS.md, or any name `[instructions]
 * files` gives inside the workspace) is skipped with a warning: never followed, so nothing
 * outside the workspace is read into the prompt, and never fatal, so it cannot make every
 * later configuration load throw. The rest of the guidance is still read.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Config } from '../dist/index.js';
import { tempWorkspace } from './support/workspace.js';

function workspace(files: Record<string, string> = {}) {
  const root = tempWorkspace(files);
  const home = tempWorkspace();
  return { root, home, userFile: join(home, 'io.toml') };
}

describe('a link at a guidance file name', () => {
  it('is skipped with a warning, whatever it leads to, and every load goes on', () => {
    const outside = tempWorkspace({ 'secret.txt': 'the key is 1234\n' });
    const targets: [string, (root: string) => string][] = [
      ['a file outside the workspace', () => join(outside, 'secret.txt')],
      ['a directory', (root) => join(root, 'docs')],
      ['a device', () => '/dev/zero'],
      ['itself', (root) => join(root, 'AGENTS.md')],
      ['nothing', (root) => join(root, 'gone.md')],
      ['a regular file inside', (root) => join(root, 'CLAUDE.md')],
    ];
    for (const [what, target] of targets) {
      const { root, userFile } = workspace({ 'docs/README.md': 'x\n', 'CLAUDE.md': 'Use tabs.\n' });
      symlinkSync(target(root), join(root, 'AGENTS.md'));
      for (let load = 0; load < 2; load++) {
        const config = Config.discover(root, { userFile });
        expect(config.instructions(), what).toEqual([]);
        expect(config.warnings(), what).toEqual([
          `(defaults): instructions.files[0]: ${join(root, 'AGENTS.md')} is a symbolic link; guidance in the workspace is read only from regular files, so it was skipped. Make it a regular file, or name the file the link leads to.`,
        ]);
        expect(() => config.contract('work'), what).not.toThrow();
      }
    }
  });

  it('is skipped when it is a directory on the way to a named file; the regular files, and the user’s own links outside, are still read', () => {
    const outside = tempWorkspace({ 'AGENTS.md': 'not yours\n' });
    const { root, userFile } = workspace({
      'AGENTS.md': 'Local rules.\n',
      'io.toml': '[instructions]\nfiles = ["AGENTS.md", "guide/AGENTS.md", "STYLE.md"]\n',
    });
    symlinkSync(outside, join(root, 'guide'));
    symlinkSync(join(outside, 'AGENTS.md'), join(root, 'STYLE.md'));
    const config = Config.discover(root, { userFile });
    expect(config.instructions()).toEqual([{ source: 'AGENTS.md', text: 'Local rules.' }]);
    const warnings = config.warnings();
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain(
      `instructions.files[1]: ${join(root, 'guide', 'AGENTS.md')} is reached through a symbolic link, ${join(root, 'guide')}`,
    );
    expect(warnings[1]).toContain(`instructions.files[2]: ${join(root, 'STYLE.md')} is a symbolic link`);
    expect(JSON.stringify(config.instructions())).not.toContain('not yours');
    // A link the user file names outside the workspace is the user's own (dotfiles), and is followed.
    const { root: plain, home, userFile: user } = workspace();
    mkdirSync(join(home, 'dotfiles'));
    writeFileSync(join(home, 'dotfiles', 'GLOBAL.md'), 'Answer in English.\n');
    symlinkSync(join(home, 'dotfiles', 'GLOBAL.md'), join(home, 'GLOBAL.md'));
    writeFileSync(user, `[instructions]\nfiles = [${JSON.stringify(join(home, 'GLOBAL.md'))}]\n`);
    const own = Config.discover(plain, { userFile: user });
    expect(own.instructions()).toEqual([{ source: join(home, 'GLOBAL.md'), text: 'Answer in English.' }]);
    expect(own.warnings()).toEqual([]);
  });
});
