/**
 * The names the runtime's own tools take. The workspace's are public (a contract's tool
 * mask names them); every built-in's, those of the families a contract turns on too, may
 * not be taken by an embedder's tool (see ./host-tool.ts). Lists rather than the tools'
 * declarations themselves, so that making a tool on the main thread does not load every
 * built-in family (the file tools, commands, the sandbox: some 45 ms of a script's start);
 * test/tools.test.ts holds them equal to the names every family declares, so a new
 * built-in cannot be missed.
 */

/** The tools a workspace run can be offered, by name. */
export const WORKSPACE_TOOL_NAMES = [
  'ask_operator',
  'edit_file',
  'exec',
  'find',
  'grep',
  'patch_file',
  'read_file',
  'read_messages',
  'send_message',
  'shell',
  'shell_kill',
  'shell_poll',
  'shell_start',
  'spawn_agent',
  'submit_plan',
  'write_file',
] as const;

/** Every built-in tool's name: the workspace's, and those of the families a contract turns on. */
export const BUILT_IN_TOOL_NAMES: ReadonlySet<string> = new Set([
  ...WORKSPACE_TOOL_NAMES,
  'expand_tools',
  'read_skill',
  'remember',
  'recall',
  'forget',
  'git_status',
  'git_diff',
  'git_log',
  'git_add',
  'git_commit',
  'git_branch',
  'git_worktree',
  'lsp_definition',
  'lsp_references',
  'lsp_symbols',
  'lsp_hover',
  'lsp_rename',
  'browser_open',
  'browser_click',
  'browser_type',
  'browser_scroll',
  'browser_text',
  'browser_screenshot',
  'run_program',
  'xlsx_sheets',
  'xlsx_read',
  'xlsx_write',
  'xlsx_set_cell',
  'docx_read',
  'docx_write',
  'pptx_read',
  'pdf_read',
  'pdf_write',
  'pdf_watermark',
  'pdf_fill_form',
  'barcode_read',
]);
