-- A history database as PilotBench schema version 1 wrote it (the first release), with two runs.
-- make_v1_fixture.sh turns this into v1.sqlite; tst_history_migration opens a copy and checks that
-- every value below survives the migration to the current version.
PRAGMA page_size = 4096;
PRAGMA application_id = 1346529395; -- 0x50426873, "PBhs"
CREATE TABLE runs (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, verdict TEXT NOT NULL DEFAULT '', started_at TEXT NOT NULL, finished_at TEXT, name TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '', device TEXT NOT NULL DEFAULT '', card TEXT NOT NULL DEFAULT '', config_json TEXT NOT NULL DEFAULT '{}', config_hash TEXT NOT NULL DEFAULT '', environment_json TEXT NOT NULL DEFAULT '{}', summary_json TEXT NOT NULL DEFAULT '{}');
CREATE TABLE samples (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, phase TEXT NOT NULL, step_time_ms REAL, forward_ms REAL, backward_ms REAL, optimizer_ms REAL, data_wait_ms REAL, allocated_bytes INTEGER, reserved_bytes INTEGER, peak_allocated_bytes INTEGER, device_used_bytes INTEGER, tokens INTEGER, loss REAL, lr REAL, grad_norm REAL, PRIMARY KEY (run_id, step)) WITHOUT ROWID;
CREATE TABLE phase_marks (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, phase TEXT NOT NULL, step INTEGER NOT NULL, start_ms REAL, duration_ms REAL, peak_allocated_bytes INTEGER, peak_device_used_bytes INTEGER);
CREATE TABLE validations (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, loss REAL, batches INTEGER, duration_ms REAL);
CREATE TABLE checkpoints (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL, path TEXT NOT NULL, bytes INTEGER, write_ms REAL);
CREATE INDEX runs_started ON runs(started_at);
CREATE INDEX phase_marks_run ON phase_marks(run_id);
CREATE INDEX validations_run ON validations(run_id);
CREATE INDEX checkpoints_run ON checkpoints(run_id);

INSERT INTO runs VALUES (1, 'pilot', 'done', 'fits', '2024-03-01T10:00:00.000Z', '2024-03-01T10:05:00.000Z', 'tiny cpu pilot', 'tiny-llama', 'cpu', '',
  '{"model":{"preset":"tiny-llama"},"train":{"seq_len":256,"micro_batch":4}}', 'aaaa1111', '{"torch_version":"2.2.0","device":"cpu"}',
  '{"verdict":"fits","peak_allocated_bytes":123456789,"step_time_p50_ms":41.5}');
INSERT INTO runs VALUES (2, 'pilot', 'done', 'does-not-fit', '2024-03-02T09:30:00.000Z', '2024-03-02T09:31:00.000Z', 'too long', 'tiny-llama', 'cuda:0', 'a100-80g',
  '{"model":{"preset":"tiny-llama"},"train":{"seq_len":8192,"micro_batch":4}}', 'bbbb2222', '{}',
  '{"verdict":"does-not-fit","message":"out of memory in backward"}');

INSERT INTO samples VALUES (1, 1, 'warmup', 50.25, 20.5, 25.0, 4.75, 0.5, 1000000, 2000000, 1500000, 3000000, 1024, 10.5, 0.0001, 1.25);
INSERT INTO samples VALUES (1, 2, 'warmup', 45.0, 18.0, 23.0, 4.0, 0.25, 1000000, 2000000, 1600000, 3000000, 1024, 10.25, 0.0002, 1.5);
INSERT INTO samples VALUES (1, 3, 'train', 41.5, 16.5, 21.0, 4.0, 0.0, 1000000, 2000000, 1700000, 3100000, 1024, 9.75, 0.0003, 1.125);
INSERT INTO samples VALUES (1, 4, 'train', 42.0, 17.0, 21.0, 4.0, 0.0, 1000000, 2000000, 1700000, 3100000, 1024, 9.5, 0.0003, 1.0);
INSERT INTO samples VALUES (1, 5, 'train', 40.0, 16.0, 20.0, 4.0, 0.0, 1000000, 2000000, 1800000, 3200000, 1024, 9.25, 0.0003, 0.875);
INSERT INTO samples VALUES (2, 1, 'warmup', 900.0, 400.0, 450.0, 50.0, 0.0, 70000000000, 78000000000, 79000000000, 80000000000, 32768, 10.0, 0.0001, 2.0);

INSERT INTO phase_marks VALUES (1, 'setup', 0, 0.0, 1200.0, 500000, 2500000);
INSERT INTO phase_marks VALUES (1, 'warmup', 1, 1200.0, 95.25, 1600000, 3000000);
INSERT INTO phase_marks VALUES (1, 'train', 3, 1295.25, 123.5, 1800000, 3200000);
INSERT INTO phase_marks VALUES (2, 'warmup', 1, 800.0, 900.0, 79000000000, 80000000000);
INSERT INTO validations VALUES (1, 5, 9.125, 8, 30.5);
INSERT INTO checkpoints VALUES (1, 5, '/tmp/pilot/ckpt-5.pt', 4096000, 120.25);
PRAGMA user_version = 1;
