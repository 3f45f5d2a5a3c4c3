// upgrade.test.mjs -- a store written by each past schema version opens with today's server and
// migrates: tests/fixtures/store/vN.sql (made by make_fixtures.c beside them, kept as they were)
// loaded into a data directory, the server started on it, and its chat, attachment, finished run
// and queued run served; then the migrated schema must be exactly the schema a fresh store gets
// (an edited old migration, or a step missing from the chain, shows as a difference).  SQLite
// only: PostgreSQL's schema has its own migrations (test_pg.c).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, PG, startServer, call, tempDir } from './lib.mjs';

const FIX = join(ROOT, 'tests', 'fixtures', 'store');
const CHAT = '0123456789abcdef0123456789abcdef';
const TOKEN = `${CHAT}.${'a'.repeat(64)}`;
const BYTES = 'fixture attachment\n';
const versions = readdirSync(FIX).map((f) => /^v(\d+)\.sql$/.exec(f)?.[1]).filter(Boolean).map(Number).sort((a, b) => a - b);
const dirs = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

const sqlite = (db, q) => execFileSync('sqlite3', [db, q], { encoding: 'utf8' }).trim();
// The schema as SQLite keeps it: every table, index and trigger, whitespace folded.
const schema = (db) => sqlite(db, "SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
  .split('\n').map((l) => l.replace(/\s+/g, ' ').trim());

let fresh = null;
async function freshSchema() {
  if (fresh) return fresh;
  const srv = await startServer();
  dirs.push(srv.dataDir);
  await srv.stop();
  const db = join(srv.dataDir, 'cerea.db');
  fresh = { schema: schema(db), version: Number(sqlite(db, 'PRAGMA user_version')) };
  return fresh;
}

test('there is a fixture for every past schema version', { skip: PG ? 'PostgreSQL migrates its own schema (test_pg.c)' : false }, async () => {
  const { version } = await freshSchema();
  assert.deepEqual(versions.filter((v) => v < version), Array.from({ length: version - 1 }, (_, i) => i + 1),
    `tests/fixtures/store has v1..v${version - 1}.sql (make_fixtures.c makes a missing one)`);
});

for (const v of versions) {
  test(`a store of schema version ${v} opens, migrates and serves what it held`, { skip: PG ? 'PostgreSQL migrates its own schema (test_pg.c)' : false }, async () => {
    const data = tempDir(`upgrade-v${v}`);
    dirs.push(data);
    execFileSync('sqlite3', [join(data, 'cerea.db')], { input: readFileSync(join(FIX, `v${v}.sql`)) });
    assert.equal(Number(sqlite(join(data, 'cerea.db'), 'PRAGMA user_version')), v);
    const sha = createHash('sha256').update(BYTES).digest('hex');
    mkdirSync(join(data, 'blobs', sha.slice(0, 2)), { recursive: true });
    writeFileSync(join(data, 'blobs', sha.slice(0, 2), sha), BYTES);

    const srv = await startServer({ dataDir: data });
    try {
      const files = await call(srv, 'GET', `/v1/chats/${CHAT}/files`, { token: TOKEN });
      assert.equal(files.status, 200, `the page token of version ${v}: ${files.buf}`);
      assert.deepEqual(files.json.files.map((f) => f.name), ['notes.txt']);
      const body = await call(srv, 'GET', `/v1/files/${files.json.files[0].file_id}`);
      assert.equal(body.buf.toString(), BYTES);
      const done = await call(srv, 'GET', `/v1/runs/${CHAT.slice(0, 30)}02`);
      assert.equal(done.status, 200, String(done.buf));
      assert.equal(done.json.status, 'ok');
      assert.equal(done.json.stdout, '42\n');
      const queued = await call(srv, 'GET', `/v1/runs/${CHAT.slice(0, 30)}03`);
      assert.equal(queued.json.state, 'queued', 'the unfinished run came back, waiting for a page');
    } finally { await srv.stop(); }

    const { schema: want, version } = await freshSchema();
    assert.equal(Number(sqlite(join(data, 'cerea.db'), 'PRAGMA user_version')), version);
    assert.deepEqual(schema(join(data, 'cerea.db')), want, `version ${v} migrated to the schema a fresh store has`);
  });
}
