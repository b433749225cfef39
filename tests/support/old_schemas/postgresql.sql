-- The DDL each migration of the PostgreSQL store ran before the stores shared one list (a version per
-- section; statements end with ';'). Test fixtures: databases as older servers left them.
-- version 1
CREATE TABLE runs (
    run_key BIGINT PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'live',
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    ended_at DOUBLE PRECISION,
    last_seen_at DOUBLE PRECISION NOT NULL,
    last_step BIGINT NOT NULL DEFAULT 0,
    last_epoch BIGINT NOT NULL DEFAULT 0,
    config BYTEA,
    finish BYTEA,
    hub_health BYTEA,
    secret_hash BYTEA
);
CREATE TABLE events (
    id BIGINT PRIMARY KEY,
    run_key BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    severity SMALLINT NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    body BYTEA NOT NULL
);
CREATE UNIQUE INDEX events_stream ON events (run_key, rank, seq);
CREATE INDEX events_kind ON events (run_key, kind, seq);
CREATE INDEX events_run ON events (run_key, id);
CREATE TABLE streams (
    run_key BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    last_seq BIGINT NOT NULL,
    contiguous BIGINT NOT NULL,
    bytes BIGINT NOT NULL DEFAULT 0,
    session TEXT,
    held_until DOUBLE PRECISION,
    PRIMARY KEY (run_key, rank)
);
CREATE TABLE kind_counts (
    run_key BIGINT NOT NULL,
    kind TEXT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (run_key, kind)
);
CREATE TABLE commands (
    command_id TEXT PRIMARY KEY,
    run_key BIGINT NOT NULL,
    action TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    request BYTEA NOT NULL,
    applied_step BIGINT,
    result BYTEA,
    message TEXT NOT NULL DEFAULT '',
    history BYTEA NOT NULL,
    idempotency_key TEXT UNIQUE
);
CREATE INDEX commands_run ON commands (run_key, status);
CREATE TABLE artifacts (
    run_key BIGINT NOT NULL,
    name TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_key, name)
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO counters VALUES ('event_id', 0), ('run_key', 0);
-- version 2
DROP INDEX events_kind;
CREATE INDEX events_kind ON events (run_key, kind, seq) WHERE kind IN ('anomaly_detected', 'command_status', 'events_dropped', 'profile_completed', 'profile_started', 'run_finished', 'run_started', 'seed_fossilized', 'seed_gate_evaluated', 'seed_germinated', 'seed_pruned', 'seed_stage_changed', 'summary', 'telemetry_level_changed');
-- version 3
ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN status_detail TEXT;
CREATE TABLE ranks (
    run_key BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'live',
    started_at DOUBLE PRECISION,
    ended_at DOUBLE PRECISION,
    seen_at DOUBLE PRECISION,
    last_step BIGINT NOT NULL DEFAULT 0,
    last_epoch BIGINT NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0,
    device TEXT NOT NULL DEFAULT '',
    hub_health BYTEA,
    PRIMARY KEY (run_key, rank)
);
CREATE TABLE command_ranks (
    command_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    run_key BIGINT NOT NULL,
    status TEXT NOT NULL,
    applied_step BIGINT,
    result BYTEA,
    message TEXT NOT NULL DEFAULT '',
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (command_id, rank)
);
CREATE INDEX command_ranks_run ON command_ranks (run_key);
-- version 4
CREATE TABLE event_blocks (
    id BIGINT PRIMARY KEY,
    run_key BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    n INTEGER NOT NULL,
    body BYTEA NOT NULL
);
CREATE UNIQUE INDEX event_blocks_stream ON event_blocks (run_key, rank, seq);
CREATE INDEX event_blocks_run ON event_blocks (run_key, id);
CREATE TABLE rare_events (
    run_key BIGINT NOT NULL,
    kind TEXT NOT NULL,
    seq BIGINT NOT NULL,
    rank INTEGER NOT NULL,
    id BIGINT NOT NULL,
    severity SMALLINT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (run_key, kind, seq, rank)
);
DROP TABLE events;
-- version 5
CREATE TABLE deleted_runs (run_id TEXT PRIMARY KEY, deleted_at DOUBLE PRECISION NOT NULL);
-- version 6
CREATE TABLE alerts (
    alert_id TEXT PRIMARY KEY,
    run_key BIGINT NOT NULL,
    rule TEXT NOT NULL,
    condition TEXT NOT NULL,
    subject TEXT NOT NULL,
    rank INTEGER,
    step BIGINT,
    open_key TEXT UNIQUE,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    fired_at DOUBLE PRECISION NOT NULL,
    seen_at DOUBLE PRECISION NOT NULL,
    resolved_at DOUBLE PRECISION,
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
    next_at DOUBLE PRECISION NOT NULL,
    claimed_until DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    sent_at DOUBLE PRECISION,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX alert_notices_due ON alert_notices (status, next_at);
CREATE INDEX alert_notices_alert ON alert_notices (alert_id);
CREATE TABLE alert_attempts (
    notice_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    alert_id TEXT NOT NULL,
    destination TEXT NOT NULL,
    ts DOUBLE PRECISION NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (notice_id, attempt)
);
CREATE INDEX alert_attempts_alert ON alert_attempts (alert_id);
-- version 7
ALTER TABLE runs ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN run_group TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_created ON runs (created_at, run_key);
CREATE INDEX runs_project ON runs (project, created_at);
CREATE INDEX runs_group ON runs (run_group, created_at);
CREATE TABLE run_tags (
    run_key BIGINT NOT NULL,
    tag TEXT NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (run_key, tag)
);
CREATE INDEX run_tags_tag ON run_tags (tag, run_key);
CREATE TABLE run_params (
    run_key BIGINT NOT NULL,
    key TEXT NOT NULL,
    num DOUBLE PRECISION,
    text TEXT,
    PRIMARY KEY (run_key, key)
);
CREATE INDEX run_params_num ON run_params (key, num);
CREATE INDEX run_params_text ON run_params (key, text);
CREATE TABLE run_metrics (
    run_key BIGINT NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    direction TEXT NOT NULL,
    count BIGINT NOT NULL,
    min DOUBLE PRECISION,
    max DOUBLE PRECISION,
    last DOUBLE PRECISION,
    step BIGINT,
    best DOUBLE PRECISION,
    pinned SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (key, run_key)
);
CREATE INDEX run_metrics_run ON run_metrics (run_key, key, count, min, max, last, step, best);
CREATE TABLE metric_directions (
    run_key BIGINT NOT NULL,
    name TEXT NOT NULL,
    direction TEXT NOT NULL,
    PRIMARY KEY (run_key, name)
);
-- version 8
DROP INDEX run_params_num;
DROP INDEX run_params_text;
CREATE INDEX run_params_num ON run_params (key, num, run_key);
CREATE INDEX run_params_text ON run_params (key, text, run_key);
CREATE INDEX run_params_key ON run_params (key, run_key) INCLUDE (num, text);
ALTER TABLE run_metrics DROP CONSTRAINT run_metrics_pkey,
    ADD CONSTRAINT run_metrics_pkey PRIMARY KEY (key, run_key) INCLUDE (count, min, max, last, step, best);
DROP INDEX runs_project;
DROP INDEX runs_group;
CREATE INDEX runs_project ON runs (project, created_at, run_key);
CREATE INDEX runs_group ON runs (run_group, created_at, run_key);
CREATE STATISTICS run_params_key_text (mcv) ON key, text FROM run_params;
CREATE STATISTICS run_params_key_num (mcv) ON key, num FROM run_params;
