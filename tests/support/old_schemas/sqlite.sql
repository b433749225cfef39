-- The DDL each migration of the SQLite store ran before the stores shared one list (a version per
-- section; statements end with ';'). Test fixtures: databases as older servers left them.
-- version 1
CREATE TABLE runs (
    run_key INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'live',
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    last_seen_at REAL NOT NULL,
    last_step INTEGER NOT NULL DEFAULT 0,
    last_epoch INTEGER NOT NULL DEFAULT 0,
    config BLOB,
    finish BLOB,
    hub_health BLOB
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    run_key INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    severity INTEGER NOT NULL,
    ts REAL NOT NULL,
    body BLOB NOT NULL
);
CREATE UNIQUE INDEX events_stream ON events (run_key, rank, seq);
CREATE INDEX events_kind ON events (run_key, kind, seq);
CREATE TABLE streams (
    run_key INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    contiguous INTEGER NOT NULL,
    PRIMARY KEY (run_key, rank)
) WITHOUT ROWID;
CREATE TABLE kind_counts (
    run_key INTEGER NOT NULL,
    kind TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (run_key, kind)
) WITHOUT ROWID;
CREATE TABLE commands (
    command_id TEXT PRIMARY KEY,
    run_key INTEGER NOT NULL,
    action TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    request BLOB NOT NULL,
    applied_step INTEGER,
    result BLOB,
    message TEXT NOT NULL DEFAULT '',
    history BLOB NOT NULL,
    idempotency_key TEXT UNIQUE
);
CREATE INDEX commands_run ON commands (run_key, status);
CREATE TABLE artifacts (
    run_key INTEGER NOT NULL,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_key, name)
) WITHOUT ROWID;
-- version 2
CREATE INDEX events_run ON events (run_key);
-- version 3
ALTER TABLE runs ADD COLUMN secret_hash BLOB;
-- version 4
ALTER TABLE streams ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE streams ADD COLUMN session TEXT;
ALTER TABLE streams ADD COLUMN held_until REAL;
UPDATE streams SET bytes = (SELECT COALESCE(SUM(length(body)), 0) FROM events e
    WHERE e.run_key = streams.run_key AND e.rank = streams.rank);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO counters VALUES ('event_id', (SELECT COALESCE(MAX(id), 0) FROM events)),
    ('run_key', (SELECT COALESCE(MAX(run_key), 0) FROM runs));
-- version 5
DROP INDEX events_kind;
CREATE INDEX events_kind ON events (run_key, kind, seq) WHERE kind IN ('anomaly_detected', 'command_status', 'events_dropped', 'profile_completed', 'profile_started', 'run_finished', 'run_started', 'seed_fossilized', 'seed_gate_evaluated', 'seed_germinated', 'seed_pruned', 'seed_stage_changed', 'summary', 'telemetry_level_changed');
-- version 6
ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN status_detail TEXT;
CREATE TABLE ranks (
    run_key INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'live',
    started_at REAL,
    ended_at REAL,
    seen_at REAL,
    last_step INTEGER NOT NULL DEFAULT 0,
    last_epoch INTEGER NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0,
    device TEXT NOT NULL DEFAULT '',
    hub_health BLOB,
    PRIMARY KEY (run_key, rank)
) WITHOUT ROWID;
CREATE TABLE command_ranks (
    command_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    run_key INTEGER NOT NULL,
    status TEXT NOT NULL,
    applied_step INTEGER,
    result BLOB,
    message TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL,
    PRIMARY KEY (command_id, rank)
) WITHOUT ROWID;
CREATE INDEX command_ranks_run ON command_ranks (run_key);
-- version 7
CREATE TABLE event_blocks (
    id INTEGER PRIMARY KEY,
    run_key INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    n INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE UNIQUE INDEX event_blocks_stream ON event_blocks (run_key, rank, seq);
CREATE INDEX event_blocks_run ON event_blocks (run_key);
CREATE TABLE rare_events (
    run_key INTEGER NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    id INTEGER NOT NULL,
    severity INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (run_key, kind, seq, rank)
);
DROP TABLE events;
-- version 8
CREATE TABLE deleted_runs (run_id TEXT PRIMARY KEY, deleted_at REAL NOT NULL);
-- version 9
CREATE TABLE alerts (
    alert_id TEXT PRIMARY KEY,
    run_key INTEGER NOT NULL,
    rule TEXT NOT NULL,
    condition TEXT NOT NULL,
    subject TEXT NOT NULL,
    rank INTEGER,
    step INTEGER,
    open_key TEXT UNIQUE,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    fired_at REAL NOT NULL,
    seen_at REAL NOT NULL,
    resolved_at REAL,
    command_id TEXT
);
CREATE INDEX alerts_run ON alerts (run_key, fired_at);
CREATE INDEX alerts_fired ON alerts (fired_at);
CREATE TABLE alert_notices (
    notice_id TEXT PRIMARY KEY,
    alert_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    state TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    claimed_until REAL,
    created_at REAL NOT NULL,
    sent_at REAL,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX alert_notices_due ON alert_notices (status, next_at);
CREATE INDEX alert_notices_alert ON alert_notices (alert_id);
CREATE TABLE alert_attempts (
    notice_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    alert_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    ts REAL NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notice_id, attempt)
);
CREATE INDEX alert_attempts_alert ON alert_attempts (alert_id);
-- version 10
ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN run_group TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_created ON runs (created_at, run_key);
CREATE INDEX runs_project ON runs (project, created_at);
CREATE INDEX runs_group ON runs (run_group, created_at);
CREATE TABLE run_tags (
    run_key INTEGER NOT NULL,
    tag TEXT NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (run_key, tag)
) WITHOUT ROWID;
CREATE INDEX run_tags_tag ON run_tags (tag, run_key);
CREATE TABLE run_params (
    run_key INTEGER NOT NULL,
    key TEXT NOT NULL,
    num REAL,
    text TEXT,
    PRIMARY KEY (run_key, key)
) WITHOUT ROWID;
CREATE INDEX run_params_num ON run_params (key, num);
CREATE INDEX run_params_text ON run_params (key, text);
CREATE TABLE run_metrics (
    run_key INTEGER NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    direction TEXT NOT NULL,
    count BIGINT NOT NULL,
    min REAL,
    max REAL,
    last REAL,
    step BIGINT,
    best REAL,
    pinned SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (key, run_key)
) WITHOUT ROWID;
CREATE INDEX run_metrics_run ON run_metrics (run_key, key, count, min, max, last, step, best);
CREATE TABLE metric_directions (
    run_key INTEGER NOT NULL,
    name TEXT NOT NULL,
    direction TEXT NOT NULL,
    PRIMARY KEY (run_key, name)
) WITHOUT ROWID;
