/**
 * The store's forward migrations, versioned in code: index i takes a store from version
 * i to i + 1. Written in the SQL both backends read (see postgres/schema.ts for how
 * PostgreSQL spells the column types); a module of its own, so neither backend loads
 * the other's driver to read them.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE runs (
    run_id            TEXT PRIMARY KEY,
    root_id           TEXT NOT NULL,
    parent_id         TEXT,
    address           TEXT NOT NULL,
    depth             INTEGER NOT NULL,
    ancestry          TEXT NOT NULL,           -- JSON array: root .. parent
    status            TEXT NOT NULL,           -- pending | queued | running | finished | budget-exhausted | failed | cancelled
    task              TEXT NOT NULL,
    spec              TEXT NOT NULL,           -- JSON: provider spec, system prompt, waits
    spawn_key         TEXT UNIQUE,             -- parent:seq:call; makes a spawn idempotent
    outcome           TEXT,                    -- JSON outcome once terminal
    reply             TEXT,
    created_at        INTEGER NOT NULL,
    ended_at          INTEGER,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    children          INTEGER NOT NULL DEFAULT 0, -- how many agents this run has spawned
    lease_owner       TEXT,
    lease_pid         INTEGER,
    lease_host        TEXT,
    lease_expires_at  INTEGER,
    generation        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (root_id, address)
  );
  CREATE INDEX runs_by_root ON runs(root_id, status);
  CREATE INDEX runs_by_parent ON runs(parent_id);

  CREATE TABLE ledger (
    run_id                 TEXT PRIMARY KEY REFERENCES runs(run_id),
    root_id                TEXT NOT NULL,
    max_steps              INTEGER,
    max_tokens             INTEGER,
    max_wall_ms            INTEGER,
    steps_spent            INTEGER NOT NULL DEFAULT 0,
    tokens_spent           INTEGER NOT NULL DEFAULT 0,
    started_at             INTEGER NOT NULL,
    max_total_agents       INTEGER,
    max_concurrent_agents  INTEGER,
    max_wait_secs          INTEGER NOT NULL,
    spawned                INTEGER NOT NULL DEFAULT 0  -- root account only: agents the tree has spawned
  );

  CREATE TABLE draws (
    draw_id     TEXT PRIMARY KEY,              -- run:seq
    root_id     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    generation  INTEGER NOT NULL,
    steps       INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    at          INTEGER NOT NULL
  );
  CREATE INDEX draws_by_root ON draws(root_id);

  CREATE TABLE steps (
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    generation   INTEGER NOT NULL,
    completion   TEXT NOT NULL,                -- JSON: what the model said
    observations TEXT NOT NULL,                -- JSON: what each tool call returned
    usage        TEXT NOT NULL,
    at           INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
  ) WITHOUT ROWID;

  CREATE TABLE checkpoints (
    run_id      TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,
    generation  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    at          INTEGER NOT NULL
  );

  CREATE TABLE events (
    event_id    INTEGER PRIMARY KEY,           -- rowid: rows are never deleted, so ids only rise
    root_id     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    seq         INTEGER,
    generation  INTEGER NOT NULL,
    type        TEXT NOT NULL,
    data        TEXT NOT NULL,
    at          INTEGER NOT NULL
  );
  CREATE INDEX events_by_run ON events(run_id, event_id);
  CREATE INDEX events_by_root ON events(root_id, event_id);

  CREATE TABLE mailbox (
    ordinal          INTEGER PRIMARY KEY,      -- send order
    msg_id           TEXT NOT NULL,            -- sender address:seq:index, unique in its tree
    root_id          TEXT NOT NULL,
    from_run         TEXT NOT NULL,
    from_address     TEXT NOT NULL,
    to_address       TEXT NOT NULL,
    body             TEXT NOT NULL,
    sent_seq         INTEGER NOT NULL,
    sent_generation  INTEGER NOT NULL,
    consumed_by      TEXT,
    consumed_seq     INTEGER,
    consumed_generation INTEGER
  );
  CREATE UNIQUE INDEX mailbox_ids ON mailbox(root_id, msg_id);
  CREATE INDEX mailbox_inbox ON mailbox(root_id, to_address, consumed_by, ordinal);

  CREATE TABLE spawn_queue (
    ordinal       INTEGER PRIMARY KEY,         -- queue order
    child_run_id  TEXT NOT NULL UNIQUE,
    root_id       TEXT NOT NULL,
    parent_id     TEXT NOT NULL,
    state         TEXT NOT NULL,               -- pending | queued | admitted | cancelled
    enqueued_at   INTEGER NOT NULL,
    admitted_at   INTEGER
  );
  CREATE INDEX spawn_queue_by_root ON spawn_queue(root_id, state, ordinal);

  CREATE TABLE intents (
    effect_key   TEXT PRIMARY KEY,
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    generation   INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    detail       TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    result       TEXT,
    finished_at  INTEGER
  );
  `,
  // 2: accounting, one row per model call (every try, failed ones included).
  `
  CREATE TABLE model_calls (
    call_id             INTEGER PRIMARY KEY,
    root_id             TEXT NOT NULL,
    run_id              TEXT NOT NULL,
    seq                 INTEGER NOT NULL,      -- the step the call belonged to
    attempt             INTEGER NOT NULL,      -- 0 for the first try of that step
    generation          INTEGER NOT NULL,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    outcome             TEXT NOT NULL,         -- ok | http | connection | truncated | stalled | undecodable | aborted | error
    status_code         INTEGER,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cache_read_tokens   INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    reasoning_tokens    INTEGER NOT NULL,
    latency_ms          REAL,
    ttft_ms             REAL,
    at                  INTEGER NOT NULL
  );
  CREATE INDEX model_calls_by_run ON model_calls(run_id, seq, attempt);
  CREATE INDEX model_calls_by_root ON model_calls(root_id, call_id);
  `,
  // 3: the workspace: what a file held before a run first touched it, and every change a step made.
  `
  CREATE TABLE restore_points (
    run_id      TEXT NOT NULL,
    path        TEXT NOT NULL,                 -- workspace-relative, posix separators
    root_id     TEXT NOT NULL,
    workspace   TEXT NOT NULL,                 -- the workspace root the path is relative to
    existed     INTEGER NOT NULL,              -- 0: the run created the file
    content     BLOB,                          -- the bytes it held; NULL when it did not exist
    seq         INTEGER NOT NULL,              -- the step that first touched it
    generation  INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (run_id, path)
  ) WITHOUT ROWID;

  CREATE TABLE file_changes (
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    ordinal     INTEGER NOT NULL,              -- order within the step
    root_id     TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    path        TEXT NOT NULL,
    diff        TEXT NOT NULL,                 -- unified diff of the whole file
    at          INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq, ordinal)
  ) WITHOUT ROWID;
  `,
  // 4: pausing for a person: the questions a run waits on, and the step in progress it will pick up.
  `
  CREATE TABLE questions (
    question_id  TEXT PRIMARY KEY,             -- kind:run:seq:call, so a re-run step asks the same question
    root_id      TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,                -- approval | plan | question | intent
    payload      TEXT NOT NULL,                -- JSON: what is asked
    status       TEXT NOT NULL,                -- open | answered
    answer       TEXT,                         -- JSON
    answered_by  TEXT,
    created_at   INTEGER NOT NULL,
    answered_at  INTEGER
  );
  CREATE INDEX questions_by_root ON questions(root_id, status);
  CREATE INDEX questions_by_run ON questions(run_id, status);

  CREATE TABLE drafts (
    run_id      TEXT PRIMARY KEY,              -- the step in progress once its effects have begun
    seq         INTEGER NOT NULL,
    generation  INTEGER NOT NULL,
    completion  TEXT NOT NULL,                 -- JSON: the model's answer the step acts on
    partial     TEXT,                          -- JSON: what the step had done when it paused
    at          INTEGER NOT NULL
  );

  CREATE TABLE step_images (
    run_id      TEXT NOT NULL,                 -- what a file held before the step in progress first wrote it,
    seq         INTEGER NOT NULL,              -- so a step re-run after a crash starts from the committed state
    path        TEXT NOT NULL,
    existed     INTEGER NOT NULL,
    content     BLOB,
    PRIMARY KEY (run_id, seq, path)
  ) WITHOUT ROWID;
  `,
  // 5: whether the vendor reported a call's tokens, or the counts are the runtime's estimate.
  `
  ALTER TABLE model_calls ADD COLUMN usage_reported INTEGER NOT NULL DEFAULT 1;
  `,
  // 6: sessions, and their turns: each turn a run, its parent the turn it follows on its branch.
  `
  CREATE TABLE sessions (
    session_id  TEXT PRIMARY KEY,
    root        TEXT NOT NULL,                 -- the workspace the turns work in
    head        TEXT,                          -- the turn the next one follows; null before the first
    created_at  INTEGER NOT NULL
  );
  CREATE TABLE turns (
    turn_id     TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(session_id),
    parent      TEXT,                          -- the turn it followed (its branch), null for a first turn
    seq         INTEGER NOT NULL,              -- order of starting, within the session
    run_id      TEXT,                          -- the run that answered it, once started
    user_text   TEXT NOT NULL,
    reply       TEXT,
    status      TEXT NOT NULL,                 -- running | the run's outcome | conflicted
    created_at  INTEGER NOT NULL,
    ended_at    INTEGER
  );
  CREATE INDEX turns_by_session ON turns(session_id, seq);
  `,
  // 7: what a person sends a running turn: a correction (steer) or an interrupt, taken at a step boundary.
  `
  CREATE TABLE steers (
    steer_id    INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,                 -- the turn's root run; never a child
    kind        TEXT NOT NULL,                 -- steer | interrupt
    body        TEXT,                          -- the correction's words; null for an interrupt
    by_whom     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    taken_seq   INTEGER                        -- the step it came before; null while it waits
  );
  CREATE INDEX steers_waiting ON steers(run_id, taken_seq);
  `,
  // 8: durable memory: notes kept between runs (global or a workspace's), and which runs drew on each.
  `
  CREATE TABLE memory_notes (
    note_id     INTEGER PRIMARY KEY,           -- the store's order; an overwrite keeps it
    scope       TEXT NOT NULL,                 -- 'global', or the workspace root
    key         TEXT NOT NULL,
    kind        TEXT NOT NULL,                 -- fact | decision
    body        TEXT NOT NULL,
    pinned      INTEGER NOT NULL DEFAULT 0,    -- the operator's correction: no run overwrites or forgets it
    runs        INTEGER NOT NULL DEFAULT 0,    -- separate runs that drew on it
    written_by  TEXT,                          -- the run that wrote it; null for the embedder
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (scope, key)
  );
  CREATE INDEX memory_notes_evict ON memory_notes(scope, pinned, runs, note_id);
  CREATE TABLE memory_draws (
    note_id     INTEGER NOT NULL,
    run_id      TEXT NOT NULL,
    how         TEXT NOT NULL,                 -- block | recall: carried in its requests, or recalled
    drawn_at    INTEGER NOT NULL,
    PRIMARY KEY (note_id, run_id)
  ) WITHOUT ROWID;
  CREATE INDEX memory_draws_by_run ON memory_draws(run_id);
  `,
  // 9: several hosts on one tree: a parent waiting on a child gives its slot up in the row, so
  // every host counts the tree's running agents from the rows (0 holds a slot, 1 parked, 2 wants it back).
  `
  ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
  CREATE INDEX runs_by_lease ON runs(status, lease_expires_at);
  `,
  // 10: a cancel any host can ask for: the root's row says a cancel was asked, and why, and
  // every host driving a run of the tree cancels what it drives when it sees it.
  `
  ALTER TABLE runs ADD COLUMN cancel_asked INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE runs ADD COLUMN cancel_reason TEXT;
  `,
  // 11: the vendor's own web tools (withWeb): how many searches and fetches a call made, and
  // the pages it found, fetched or cited, by the call (run, step, attempt) that reported them.
  `
  ALTER TABLE model_calls ADD COLUMN web_searches INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE model_calls ADD COLUMN web_fetches INTEGER NOT NULL DEFAULT 0;
  CREATE TABLE web_sources (
    source_id   INTEGER PRIMARY KEY,
    root_id     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    kind        TEXT NOT NULL,                 -- result | citation | fetched
    url         TEXT NOT NULL,
    title       TEXT,
    cited_text  TEXT,
    at          INTEGER NOT NULL
  );
  CREATE INDEX web_sources_by_run ON web_sources(run_id, seq, source_id);
  CREATE INDEX web_sources_by_root ON web_sources(root_id, source_id);
  `,
];
