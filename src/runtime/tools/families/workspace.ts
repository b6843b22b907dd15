/**
 * The workspace tools, files and commands, as a workspace run offers them: each is one
 * entry of {@link FILE_TOOLS} (./files.ts) or {@link COMMAND_TOOLS} (./commands.ts), made
 * a {@link Tool} here. They run inside the agent's thread, on the run's workspace session;
 * the policy's settling, the approver, the intent journal, restore points and the step's
 * trace are reached through the step context each call is given ({@link WorkspaceCall}).
 */
import type { ArgumentSchema } from '../../arguments.js';
import type { DocumentFormat } from '../../documents/documents.js';
import type { WorkspaceSession } from '../../workspace/session.js';
import type { WorkspaceCall } from '../context.js';
import type { StepContext, Tool, ToolResult } from '../tool.js';
import { BROWSER_TOOLS } from './browser.js';
import { COMMAND_TOOLS } from './commands.js';
import { DOCUMENT_TOOLS } from './documents.js';
import { FILE_TOOLS } from './files.js';
import { GIT_TOOLS } from './git.js';
import { LSP_TOOLS } from './lsp.js';

/**
 * How a workspace tool is declared: one entry of {@link FILE_TOOLS} or {@link COMMAND_TOOLS} is the whole of
 * a tool (its definition for the model, what kind of act it is, where it is offered, and
 * what it does with the session's step context).
 */
export interface WorkspaceToolDeclaration {
  description: string;
  parameters: ArgumentSchema;
  /**
   * `reads` changes nothing; `acts` changes the workspace or runs something, and is refused
   * while a plan gate is still planning; `controls` acts only on what the run itself
   * started (its background commands).
   */
  kind: 'reads' | 'acts' | 'controls';
  /**
   * Starts while its completion still streams (see {@link Tool.early}). Not grep or find:
   * their matching runs on the bounded search pool, where a search started for a turn that
   * is then abandoned would hold the pool's one thread.
   */
  early?(session: WorkspaceSession, args: Record<string, unknown>, call: StepContext): ToolResult | null;
  /** The tier it is offered in under tool tiers (see {@link Tool.family}); absent, the core. */
  family?: 'jobs' | 'documents';
  /** Offered in single-file mode, which reaches one file and nothing else: no search, and no command. */
  singleFile?: true;
  run(session: WorkspaceSession, args: Record<string, unknown>, call: WorkspaceCall): Promise<ToolResult>;
}

const WORKSPACE_TOOLS = { ...FILE_TOOLS, ...COMMAND_TOOLS };

/** The name of a workspace tool. */
export type WorkspaceToolName = keyof typeof WORKSPACE_TOOLS;

/**
 * The workspace tools, as the registry takes them; single-file mode offers only the file
 * tools, the git tools ({@link GIT_TOOLS}) come only with `git` (a contract's `withGit()`), and the
 * language servers' ({@link LSP_TOOLS}) only with `lsp` (`withLsp()`), the browser's ({@link BROWSER_TOOLS}) only with `browser` (`withBrowser()`), a document format's ({@link DOCUMENT_TOOLS}) only with `documents` naming it (`withDocuments()`). A tool that acts waits while the run is planning; an early read starts only where
 * the policy allows it outright.
 */
export function workspaceTools(
  mode: 'workspace' | 'file',
  options: { git?: boolean; lsp?: boolean; browser?: boolean; documents?: readonly DocumentFormat[] } = {},
): Tool<WorkspaceCall>[] {
  const declared: Record<string, WorkspaceToolDeclaration> = {
    ...WORKSPACE_TOOLS,
    ...(options.git && mode === 'workspace' ? GIT_TOOLS : {}),
    ...(options.lsp && mode === 'workspace' ? LSP_TOOLS : {}),
    ...(options.browser && mode === 'workspace' ? BROWSER_TOOLS : {}),
    ...(mode === 'workspace'
      ? Object.assign({}, ...(options.documents ?? []).map((format) => DOCUMENT_TOOLS[format]))
      : {}),
  };
  return Object.entries(declared)
    .filter(([, tool]) => mode === 'workspace' || tool.singleFile === true)
    .map(([name, tool]) => {
      const early = tool.early;
      return {
        name,
        description: tool.description,
        parameters: tool.parameters,
        // Stopping what the run itself started acts on the world too.
        kind: tool.kind === 'reads' ? ('reads' as const) : ('acts' as const),
        ...(tool.family ? { family: tool.family } : {}),
        ...(early
          ? {
              early: (args: Record<string, unknown>, call: WorkspaceCall) =>
                call.workspace ? early(call.workspace, args, call) : null,
            }
          : {}),
        execute: async (args: Record<string, unknown>, call: WorkspaceCall) => {
          const session = call.workspace;
          if (!session) return { content: `${name} is not available outside a workspace run.`, isError: true };
          if (tool.kind === 'acts' && call.planning) {
            const reason = `${name} waits for an approved plan: this run is in its planning phase, so read what you need and call submit_plan.`;
            return { content: reason, isError: true, refusal: { rule: 'plan-gate', reason } };
          }
          return tool.run(session, args, call);
        },
      };
    });
}
