/**
 * Variables a command sets: those that change which program runs or make one load code
 * (asked about), and git's own (refused outright).
 */

/** Variables that change which program runs or make a program load code. */
const CODE_LOADING: readonly RegExp[] = [
  /^(PATH|HOME|SHELL|ENV|BASH_ENV|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|CDPATH|ZDOTDIR|XDG_CONFIG_HOME)$/,
  /^BASH_FUNC_/,
  /^(LD_|DYLD_)/,
  /^NODE_(OPTIONS|PATH|REPL_EXTERNAL_MODULE)$/,
  /^PYTHON(PATH|STARTUP|HOME|USERBASE|EXECUTABLE)$/,
  /^PERL(5OPT|5LIB|LIB|5DB)$/,
  /^RUBY(OPT|LIB)$/,
  /^GIT_(SSH|SSH_COMMAND|EXTERNAL_DIFF|PAGER|EDITOR|SEQUENCE_EDITOR|ASKPASS|EXEC_PATH|CONFIG.*|PROXY_COMMAND|TEMPLATE_DIR|DIR|WORK_TREE|ALLOW_PROTOCOL)$/,
  /^(PAGER|MANPAGER|EDITOR|VISUAL|BROWSER|SSH_ASKPASS|SUDO_ASKPASS|LESSOPEN|LESSCLOSE)$/,
  /^npm_config_/i,
  /^(JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH|GCONV_PATH)$/,
];

export function isCodeLoadingVariable(name: string): boolean {
  return CODE_LOADING.some((pattern) => pattern.test(name));
}

/**
 * Variables refused outright, wherever a line or a wrapper sets them: git's own
 * (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, `GIT_SSH_COMMAND`,
 * `GIT_TRACE*`, ...) move where git reads its configuration and code and where it writes
 * files, which no exec rule about git can see. (The runtime's own environment for
 * commands holds none of them.)
 */
export function isRefusedVariable(name: string): boolean {
  return /^GIT_/i.test(name);
}

export function refusedVariable(pair: string): string {
  const name = pair.includes('=') ? pair.slice(0, pair.indexOf('=')) : pair;
  return `setting ${name}: git's variables move where it reads configuration and code and where it writes; set nothing of git's from a command`;
}
