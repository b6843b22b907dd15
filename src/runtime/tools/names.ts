/**
 * The names the runtime's own tools take: an embedder's tool may not take one (see
 * ./host-tool.ts). A list rather than the tools' declarations themselves, so that making a
 * tool on the main thread does not load every built-in family (the file tools, commands,
 * the sandbox: some 45 ms of a script's start); test/tools.test.ts holds it equal to the
 * names every family declares, so a new built-in cannot be missed.
 */
export const BUILT_IN_TOOL_NAMES: ReadonlySet<string> = new Set([
  'ask_operator',
  'edit_file',
  'exec',
  'expand_tools',
  'find',
  'forget',
  'git_add',
  'git_branch',
  'git_commit',
  'git_diff',
  'git_log',
  'git_status',
  'grep',
  'lsp_definition',
  'lsp_hover',
  'lsp_references',
  'lsp_rename',
  'lsp_symbols',
  'patch_file',
  'read_file',
  'read_messages',
  'read_skill',
  'recall',
  'remember',
  'send_message',
  'shell',
  'shell_kill',
  'shell_poll',
  'shell_start',
  'spawn_agent',
  'submit_plan',
  'write_file',
]);
