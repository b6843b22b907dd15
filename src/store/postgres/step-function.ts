/**
 * A step's commit in one statement on PostgreSQL: a function installed with the schema
 * that does, on the server, what the step rule (../rules/step.ts) does for the common
 * step, so the store actor sends a batch of such steps and its COMMIT in one flight and
 * waits on the server once. The step rule stays the definition: the function takes only
 * a step that releases no spawn, does not end its run and has no vendor web sources
 * (the mail it reads and sends goes with it), and for such a step it does exactly what the rule does (a test commits the
 * same steps both ways and compares every row).
 *
 * Where the rule would do anything else (the fence does not hold, the step is not the
 * next, a ceiling would be crossed, children reserved by the step or a person's
 * corrections wait, a message it read is not waiting for it, one it sent has no
 * addressee), it raises {@link LEFT_TO_RULES}: the transaction keeps nothing, what the
 * function wrote before included, and the writer runs the batch by the rules, in its
 * order, which say why.
 *
 * Its name carries a digest of its text, so a release that changes it installs a function
 * of its own, and hosts of two releases sharing a store during a deploy each call theirs.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { DrawAmount, EventData } from '../../runtime/events.js';
import { scrubValue } from '../../runtime/secrets.js';
import type { StoreRequestBody } from '../port.js';
import type { CommitStepInput, CommitStepResult, Notifications } from '../records.js';
import { emptyNotifications, eventOf, eventText } from '../rules/context.js';
import { callColumns, stepDraw, stepEnd } from '../rules/step.js';
import type { Query } from '../sql.js';
import { quoteIdentifier, textSafe } from './connection.js';
import { META_TABLE } from './schema.js';

/** The function's parameters, in order: its signature, and the casts each call names. */
const PARAMETERS: readonly (readonly [string, string])[] = [
  ['p_run', 'text'],
  ['p_owner', 'text'],
  ['p_generation', 'bigint'],
  ['p_seq', 'bigint'],
  ['p_steps', 'bigint'],
  ['p_tokens', 'bigint'],
  ['p_at', 'bigint'],
  ['p_completion', 'text'],
  ['p_observations', 'text'],
  ['p_usage', 'text'],
  ['p_draw', 'text'],
  ['p_step_end', 'text'],
  ['p_state', 'text'],
  ['p_event_types', 'text[]'],
  ['p_event_data', 'text[]'],
  ['p_calls', 'jsonb'],
  ['p_paths', 'text[]'],
  ['p_diffs', 'text[]'],
  ['p_consumed', 'text[]'],
  ['p_read', 'text'],
  ['p_sent_to', 'text[]'],
  ['p_sent_body', 'text[]'],
  ['p_channel', 'text'],
  ['p_origin', 'text'],
];

/** The signature as PostgreSQL spells it (`pg_get_function_identity_arguments`). */
const SIGNATURE = PARAMETERS.map(([name, type]) => `${name} ${type}`).join(', ');

const SOURCE = `
DECLARE
  r record;
  chain text[];
  account record;
  v_prefix text;
  accounts int := 0;
  root_steps bigint;
  root_tokens bigint;
  ids bigint[];
  changed int;
  sent_data text[];
  mail text;
BEGIN
  -- Whenever the rule would do more than commit, the function raises IOHRL: the transaction
  -- keeps nothing of it, and the rule runs instead. The run's row: fenced, this step the next.
  UPDATE runs SET last_seq = p_seq
    WHERE run_id = p_run AND generation = p_generation AND lease_owner = p_owner AND last_seq = p_seq - 1
    RETURNING run_id, root_id, parent_id, address, ancestry INTO r;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
  END IF;
  -- Children the step reserved, a person's corrections for a root: the rule's to settle.
  v_prefix := r.run_id || ':' || p_seq || ':';
  IF EXISTS (SELECT 1 FROM runs WHERE parent_id = r.run_id AND status = 'pending'
      AND substr(spawn_key, 1, length(v_prefix)) = v_prefix)
    OR (r.parent_id IS NULL AND EXISTS (SELECT 1 FROM steers WHERE run_id = r.run_id AND taken_seq IS NULL)) THEN
    RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
  END IF;
  -- The draw on every account from the run up to the root, none over its ceiling after it
  -- (drawCrossing's rule: what was spent and the draw, over the ceiling).
  chain := ARRAY(SELECT jsonb_array_elements_text(r.ancestry::jsonb)) || r.run_id;
  FOR account IN UPDATE ledger SET steps_spent = steps_spent + p_steps, tokens_spent = tokens_spent + p_tokens
    WHERE run_id = ANY(chain) RETURNING run_id, max_steps, max_tokens, steps_spent, tokens_spent LOOP
    accounts := accounts + 1;
    IF (account.max_steps IS NOT NULL AND account.steps_spent > account.max_steps)
      OR (account.max_tokens IS NOT NULL AND p_tokens > 0 AND account.tokens_spent > account.max_tokens) THEN
      RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
    END IF;
    IF account.run_id = r.root_id THEN
      root_steps := account.steps_spent;
      root_tokens := account.tokens_spent;
    END IF;
  END LOOP;
  IF accounts <> cardinality(chain) OR root_steps IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
  END IF;
  -- The step's rows, as the rule writes them.
  INSERT INTO draws (draw_id, root_id, run_id, seq, generation, steps, tokens, at)
    VALUES (r.run_id || ':' || p_seq, r.root_id, r.run_id, p_seq, p_generation, p_steps, p_tokens, p_at);
  INSERT INTO steps (run_id, seq, generation, completion, observations, usage, at)
    VALUES (r.run_id, p_seq, p_generation, p_completion, p_observations, p_usage, p_at);
  IF cardinality(p_paths) > 0 THEN
    INSERT INTO file_changes (run_id, seq, ordinal, root_id, generation, path, diff, at)
      SELECT r.run_id, p_seq, c.n - 1, r.root_id, p_generation, c.path, c.diff, p_at
      FROM unnest(p_paths, p_diffs) WITH ORDINALITY AS c(path, diff, n) ORDER BY c.n;
  END IF;
  -- The messages it read, each still waiting in its inbox.
  IF cardinality(p_consumed) > 0 THEN
    UPDATE mailbox SET consumed_by = r.run_id, consumed_seq = p_seq, consumed_generation = p_generation
      WHERE msg_id = ANY(p_consumed) AND root_id = r.root_id AND to_address = r.address AND consumed_by IS NULL;
    GET DIAGNOSTICS changed = ROW_COUNT;
    IF changed <> cardinality(p_consumed) THEN
      RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
    END IF;
  END IF;
  INSERT INTO model_calls (root_id, run_id, seq, attempt, generation, provider, model, outcome, status_code,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, latency_ms, ttft_ms,
    usage_reported, web_searches, web_fetches, at)
    SELECT r.root_id, r.run_id, p_seq, c.n - 1, p_generation, c.call->>0, c.call->>1, c.call->>2, (c.call->>3)::bigint,
      (c.call->>4)::bigint, (c.call->>5)::bigint, (c.call->>6)::bigint, (c.call->>7)::bigint, (c.call->>8)::bigint,
      (c.call->>9)::double precision, (c.call->>10)::double precision, (c.call->>11)::bigint, (c.call->>12)::bigint,
      (c.call->>13)::bigint, p_at
    FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS c(call, n) ORDER BY c.n;
  -- The messages it sent, each to an address of its tree, its id the sender's address, step and place.
  IF cardinality(p_sent_to) > 0 THEN
    IF EXISTS (SELECT 1 FROM unnest(p_sent_to) AS m(to_address)
      WHERE NOT EXISTS (SELECT 1 FROM runs x WHERE x.root_id = r.root_id AND x.address = m.to_address)) THEN
      RAISE EXCEPTION USING ERRCODE = 'IOHRL', MESSAGE = 'left to the step rule';
    END IF;
    INSERT INTO mailbox (msg_id, root_id, from_run, from_address, to_address, body, sent_seq, sent_generation)
      SELECT r.address || ':' || p_seq || ':' || (m.n - 1), r.root_id, r.run_id, r.address, m.to_address, m.body,
        p_seq, p_generation
      FROM unnest(p_sent_to, p_sent_body) WITH ORDINALITY AS m(to_address, body, n) ORDER BY m.n;
  END IF;
  sent_data := ARRAY(SELECT '{"msgId":' || to_json(r.address || ':' || p_seq || ':' || (m.n - 1))::text
    || ',"to":' || to_json(m.to_address)::text || '}'
    FROM unnest(p_sent_to) WITH ORDINALITY AS m(to_address, n) ORDER BY m.n);
  -- The step's events in order, what it read and sent, then its spend and its end: ids are handed out in that order.
  WITH added AS (
    INSERT INTO events (root_id, run_id, seq, generation, type, data, at)
    SELECT r.root_id, r.run_id, p_seq, p_generation, e.type, e.data, p_at
    FROM unnest(
      p_event_types || CASE WHEN p_read IS NULL THEN '{}'::text[] ELSE ARRAY['message-read'] END
        || array_fill('message-sent'::text, ARRAY[cardinality(p_sent_to)]) || ARRAY['spend', 'step-end'],
      p_event_data || CASE WHEN p_read IS NULL THEN '{}'::text[] ELSE ARRAY[p_read] END || sent_data || ARRAY[
        '{"draw":' || p_draw || ',"treeSpent":{"steps":' || root_steps || ',"tokens":' || root_tokens || '}}',
        p_step_end]) WITH ORDINALITY AS e(type, data, n) ORDER BY e.n
    RETURNING events.event_id)
  SELECT array_agg(added.event_id ORDER BY added.event_id) INTO ids FROM added;
  DELETE FROM drafts WHERE run_id = r.run_id;
  DELETE FROM step_images WHERE run_id = r.run_id AND seq <= p_seq;
  INSERT INTO checkpoints (run_id, seq, generation, state, at) VALUES (r.run_id, p_seq, p_generation, p_state, p_at)
    ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, generation = excluded.generation, state = excluded.state,
      at = excluded.at;
  -- Other hosts following the tree hear of its events when the commit lands (see notify.ts).
  mail := (SELECT string_agg('[' || to_json(r.root_id)::text || ',' || to_json(m.to_address)::text || ']', ','
    ORDER BY m.n) FROM unnest(p_sent_to) WITH ORDINALITY AS m(to_address, n));
  PERFORM pg_notify(p_channel, '{"o":' || to_json(p_origin)::text
    || ',"r":[' || CASE WHEN mail IS NULL THEN '' ELSE to_json(r.root_id)::text END || '],"e":[],"m":['
    || coalesce(mail, '') || '],"v":[' || to_json(r.root_id)::text || ']}');
  RETURN jsonb_build_object('root', r.root_id, 'address', r.address, 'ids', to_jsonb(ids), 'steps', root_steps,
    'tokens', root_tokens);
END
`;

/**
 * Its statements run on plans made once per connection: each is a lookup by key or an
 * insert, which a plan made for its values would not do better, and planning them afresh
 * cost a fifth of the call.
 */
const BODY = `(${SIGNATURE}) RETURNS jsonb LANGUAGE plpgsql
  SET search_path FROM CURRENT SET plan_cache_mode = force_generic_plan AS $step$${SOURCE}$step$`;

/** The SQLSTATE the function raises for a step it leaves to the rule. */
export const LEFT_TO_RULES = 'IOHRL';

/** The function's name: its text's digest in it, so a changed function is a new one. */
export const STEP_FUNCTION = `io_harness_step_${createHash('sha256').update(BODY).digest('hex').slice(0, 12)}`;

/** The call, by the schema's name and every parameter's type: no other function of that name is chosen. */
export function stepCall(schema: string): string {
  const casts = PARAMETERS.map(([, type]) => `?::${type}`).join(', ');
  return `SELECT ${quoteIdentifier(schema)}.${STEP_FUNCTION}(${casts}) AS done`;
}

/**
 * SQLSTATEs of a function that cannot be made here: no right to (42501), a read-only
 * server (25006), a server older than PostgreSQL 12, which has no `plan_cache_mode` (42704).
 */
const CANNOT_CREATE = new Set(['42501', '25006', '42704']);

/**
 * Installs the function in the store's schema, inside the transaction that prepares it,
 * when it is not there and this user owns the store (a function it trusts is the store
 * owner's: see {@link stepFunctionIn}), and says whether the store has one it trusts. A
 * user who cannot create it keeps the rules' way of committing: the store works as
 * before, one wait more a step.
 */
export async function installStepFunction(client: pg.PoolClient, schema: string): Promise<boolean> {
  const found = await client.query<{ here: boolean; owner: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = $2 AND pg_get_function_identity_arguments(p.oid) = $3) AS here,
     pg_has_role(current_user, c.relowner, 'USAGE') AS owner
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $4`,
    [schema, STEP_FUNCTION, SIGNATURE, META_TABLE],
  );
  const row = found.rows[0];
  if (row && !row.here && row.owner) {
    await client.query('SAVEPOINT step_function');
    try {
      await client.query(`CREATE FUNCTION ${quoteIdentifier(schema)}.${STEP_FUNCTION}${BODY}`);
      await client.query('RELEASE SAVEPOINT step_function');
    } catch (error) {
      await client.query('ROLLBACK TO SAVEPOINT step_function');
      if (!CANNOT_CREATE.has(String((error as { code?: unknown }).code))) throw error;
    }
  }
  return stepFunctionIn(client, schema);
}

/**
 * Whether `schema` holds this release's function as this release made it: its name,
 * its parameters, its text, run with its caller's rights, and owned by the store's
 * owner. One that another user of the database put there under the name is never called.
 */
async function stepFunctionIn(client: pg.ClientBase, schema: string): Promise<boolean> {
  const found = await client.query(
    `SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $4
     WHERE n.nspname = $1 AND p.proname = $2 AND pg_get_function_identity_arguments(p.oid) = $3
       AND p.prosrc = $5 AND NOT p.prosecdef AND p.proowner = c.relowner`,
    [schema, STEP_FUNCTION, SIGNATURE, META_TABLE, SOURCE],
  );
  return found.rows.length > 0;
}

/** The event of the messages a step read. */
const read = (input: CommitStepInput): EventData => ({ type: 'message-read', msgIds: input.consumed });

/** What the function answers for a step it committed. */
interface Committed {
  root: string;
  address: string;
  ids: number[];
  steps: number;
  tokens: number;
}

/** A step sent to the function, and how its answer becomes the write's outcome. */
export interface ServerStep {
  readonly query: Query;
  /** The outcome and what it announces, once the batch committed. */
  outcome(): { value: CommitStepResult; notifications: Notifications };
}

const whole = (value: unknown) => Number.isSafeInteger(value);
const finiteOrNull = (value: unknown) => value === null || (typeof value === 'number' && Number.isFinite(value));

/**
 * Whether the function does what the rule would for `input`: a step that only commits,
 * its fence and counts of the types the rule compares them as (anything else is the
 * rule's to judge).
 */
function plain(input: CommitStepInput): boolean {
  const calls = input.calls ?? [];
  return (
    typeof input.runId === 'string' &&
    typeof input.owner === 'string' &&
    whole(input.generation) &&
    whole(input.seq) &&
    whole(input.now) &&
    whole(input.usage.inputTokens) &&
    whole(input.usage.outputTokens) &&
    calls.every(
      (call) =>
        [call.inputTokens, call.outputTokens, call.cacheReadTokens, call.cacheWriteTokens, call.reasoningTokens].every(
          whole,
        ) &&
        (call.statusCode === null || whole(call.statusCode)) &&
        whole(call.web?.searches ?? 0) &&
        whole(call.web?.fetches ?? 0) &&
        finiteOrNull(call.latencyMs) &&
        finiteOrNull(call.ttftMs),
    ) &&
    input.final === null &&
    input.consumed.every((msgId) => typeof msgId === 'string') &&
    input.sent.every((message) => typeof message.to === 'string' && typeof message.body === 'string') &&
    input.spawned.length === 0 &&
    !calls.some((call) => (call.web?.sources?.length ?? 0) > 0) &&
    !input.events.some((event) => event.type === 'cancel-asked')
  );
}

/** `write` as a call of the function (`how`: see {@link StepCall}), or null when it is not a plain step. */
export function asCall(write: StoreRequestBody, how: StepCall): ServerStep | null {
  if (write.op !== 'commitStep') return null;
  // What the rules write is scrubbed of the secrets this thread holds (rules/index.ts): so is this.
  return serverStep(scrubValue(write.input), how);
}

/** How a writer calls the function: the call's text ({@link stepCall}), and the hint its commit sends (see notify.ts). */
export interface StepCall {
  call: string;
  channel: string;
  origin: string;
}

function serverStep(input: CommitStepInput, { call, channel, origin }: StepCall): ServerStep | null {
  let params: unknown[];
  let draw: DrawAmount;
  let end: EventData;
  try {
    if (!plain(input)) return null;
    draw = stepDraw(input);
    end = stepEnd(input);
    const changes = input.changes ?? [];
    params = [
      input.runId,
      input.owner,
      input.generation,
      input.seq,
      draw.steps,
      draw.tokens,
      input.now,
      JSON.stringify(input.completion),
      JSON.stringify(input.observations),
      JSON.stringify(input.usage),
      JSON.stringify(draw),
      eventText(end),
      JSON.stringify({ seq: input.seq }),
      // What goes inside an array or JSON is made text-safe here; a statement's own values are by its sender.
      input.events.map((event) => textSafe(event.type)),
      input.events.map((event) => eventText(event)),
      JSON.stringify((input.calls ?? []).map(callColumns), (_key, value) => textSafe(value)),
      changes.map((change) => textSafe(change.path)),
      changes.map((change) => textSafe(change.diff)),
      input.consumed.map(textSafe),
      input.consumed.length > 0 ? eventText(read(input)) : null,
      input.sent.map((message) => textSafe(message.to)),
      input.sent.map((message) => textSafe(message.body)),
      channel,
      origin,
    ];
  } catch {
    // Input the rule would refuse: the rule says why.
    return null;
  }
  let answer: Committed | null = null;
  return {
    query: {
      op: 'put',
      text: call,
      params,
      onRows: (rows) => {
        answer = ((rows[0] as { done?: Committed | null } | undefined)?.done ?? null) as Committed | null;
      },
    },
    outcome() {
      const done = answer as Committed | null;
      if (done === null) throw new Error('the step function answered nothing for a step it committed');
      const treeSpent = { steps: done.steps, tokens: done.tokens };
      // In the order the rule records them (rules/step.ts).
      const recorded: EventData[] = [
        ...input.events,
        ...(input.consumed.length > 0 ? [read(input)] : []),
        ...input.sent.map(
          (message, index): EventData => ({
            type: 'message-sent',
            msgId: `${done.address}:${input.seq}:${index}`,
            to: message.to,
          }),
        ),
        { type: 'spend', draw, treeSpent },
        end,
      ];
      const notifications = emptyNotifications();
      for (const [index, data] of recorded.entries()) {
        const event = eventOf(done.root, input.runId, input.seq, input.generation, data, input.now);
        event.eventId = Number(done.ids[index]);
        notifications.events.push(event);
      }
      for (const message of input.sent) notifications.mail.push({ rootId: done.root, to: message.to });
      return { value: { status: 'committed', seq: input.seq, treeSpent }, notifications };
    },
  };
}
