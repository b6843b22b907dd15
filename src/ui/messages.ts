/**
 * A session's conversation as the AI SDK's `UIMessage`s: what a chat page built with
 * `useChat` is given as its `messages` when it opens a conversation that already has turns
 * (a reload, a link shared). Each turn is the user's words and the agent's message: its
 * steps' text and tool calls with their input and output, and its reply.
 */
import type { StepRecord, TurnRecord } from '../store/records.js';

/** A part of a message, as the AI SDK's `UIMessage` has it (the kinds written here). */
export type UIMessagePart =
  | { type: 'text'; text: string; state: 'done' }
  | { type: 'step-start' }
  | {
      type: 'dynamic-tool';
      toolName: string;
      toolCallId: string;
      state: 'output-available';
      input: unknown;
      output: unknown;
    }
  | {
      type: 'dynamic-tool';
      toolName: string;
      toolCallId: string;
      state: 'output-error';
      input: unknown;
      errorText: string;
    };

/** A message as `useChat` holds it. */
export interface UIMessage {
  id: string;
  role: 'user' | 'assistant';
  /** For an agent's message: the turn it answers and how it ended. */
  metadata?: { turnId: string; status: string };
  parts: UIMessagePart[];
}

/** One turn of a branch with its steps, as the store reads it. */
export interface BranchTurn {
  turn: TurnRecord;
  steps: Pick<StepRecord, 'seq' | 'completion' | 'observations'>[];
}

/** The id of a turn's user message; the agent's message has the turn's own id. */
export function userMessageId(turnId: string): string {
  return `${turnId}-user`;
}

/**
 * The messages of a branch, oldest first; `running`, a turn begun on it and not yet ended,
 * adds its user message (its answer is the stream a page reconnects to).
 */
export function uiMessagesOf(branch: readonly BranchTurn[], running: TurnRecord | null = null): UIMessage[] {
  const messages: UIMessage[] = [];
  for (const { turn, steps } of branch) {
    messages.push(userMessage(turn));
    const parts: UIMessagePart[] = [];
    let lastText: string | null = null;
    for (const step of steps) {
      parts.push({ type: 'step-start' });
      lastText = null;
      if (step.completion.text !== '') {
        parts.push({ type: 'text', text: step.completion.text, state: 'done' });
        lastText = step.completion.text;
      }
      for (const call of step.completion.toolCalls) {
        const observation = step.observations.find((each) => each.callId === call.id);
        if (!observation) continue;
        parts.push(
          observation.isError
            ? {
                type: 'dynamic-tool',
                toolName: call.name,
                toolCallId: call.id,
                state: 'output-error',
                input: call.args,
                errorText: observation.content,
              }
            : {
                type: 'dynamic-tool',
                toolName: call.name,
                toolCallId: call.id,
                state: 'output-available',
                input: call.args,
                output: observation.content,
              },
        );
      }
    }
    // A reply turn has no step: its reply is its message.
    if (turn.reply && turn.reply !== lastText) parts.push({ type: 'text', text: turn.reply, state: 'done' });
    messages.push({
      id: turn.turnId,
      role: 'assistant',
      metadata: { turnId: turn.turnId, status: turn.status },
      parts,
    });
  }
  if (running) messages.push(userMessage(running));
  return messages;
}

function userMessage(turn: TurnRecord): UIMessage {
  return { id: userMessageId(turn.turnId), role: 'user', parts: [{ type: 'text', text: turn.text, state: 'done' }] };
}
