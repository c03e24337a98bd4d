-- kvplan database schema. Each "-- version N" section migrates a version N-1 database to
-- version N; PRAGMA user_version records the version a database is at. Sections are never
-- edited once released: a change is a new section.

-- version 1
CREATE TABLE scenarios (
    id      INTEGER PRIMARY KEY,
    hash    TEXT NOT NULL UNIQUE,           -- FNV-1a 64 of the canonical JSON
    name    TEXT NOT NULL,
    json    TEXT NOT NULL CHECK (json_valid(json))   -- the resolved scenario
) STRICT;

CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    scenario_id INTEGER NOT NULL REFERENCES scenarios(id),
    kind        TEXT NOT NULL CHECK (kind IN ('predicted', 'measured')),
    executor    TEXT NOT NULL,              -- model, cpu, cuda, import
    options     TEXT NOT NULL CHECK (json_valid(options)),
    seed        INTEGER NOT NULL,
    started     TEXT NOT NULL,              -- ISO 8601 UTC
    finished    TEXT NOT NULL,
    version     TEXT NOT NULL               -- kvplan version
) STRICT;

CREATE TABLE metrics (
    run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name    TEXT NOT NULL,                  -- unit in the name: ttft_p99_s, throughput_req_per_s
    value   REAL,                           -- NULL when undefined (e.g. TPOT of one-token outputs)
    PRIMARY KEY (run_id, name)
) STRICT;

-- version 2
CREATE TABLE requests (
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    req_id        INTEGER NOT NULL,
    replica       INTEGER NOT NULL,
    arrival_s     REAL NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    queue_s       REAL NOT NULL,
    ttft_s        REAL NOT NULL,
    tpot_s        REAL NOT NULL,
    e2e_s         REAL NOT NULL,
    preemptions   INTEGER NOT NULL,
    PRIMARY KEY (run_id, req_id)
) STRICT;

CREATE TABLE timeseries (
    run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t_s      REAL NOT NULL,
    kv_used  REAL NOT NULL,                 -- fraction of blocks referenced, all replicas
    waiting  INTEGER NOT NULL,
    running  INTEGER NOT NULL,
    PRIMARY KEY (run_id, t_s)
) STRICT;

-- version 3
CREATE TABLE calibrations (
    id               INTEGER PRIMARY KEY,
    name             TEXT NOT NULL,      -- the profile it wrote, e.g. cpu-local.calibrated
    base             TEXT NOT NULL,      -- the hardware profile it refines
    backend          TEXT NOT NULL,      -- cpu, cuda, or import (fitted to stored runs)
    host             TEXT NOT NULL,
    created          TEXT NOT NULL,      -- ISO 8601 UTC
    source           TEXT NOT NULL,      -- 'microbenchmarks' or 'runs 3,4'
    fit              TEXT NOT NULL CHECK (json_valid(fit)),      -- the coefficients
    points           TEXT NOT NULL CHECK (json_valid(points)),   -- measured against predicted
    rms_log_error    REAL,
    median_abs_error REAL
) STRICT;
