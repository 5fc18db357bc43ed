-- sqlite.sql: an SQLite workload for bench/profile.sh: `sqlite3 :memory: < sqlite.sql`, or
-- `sqlite3 :memory: ".read sqlite.sql"` (what profile.sh runs: no standard input needed).
-- Builds an indexed table of 200,000 rows (text keys, payloads of varying length), updates a
-- quarter of them (growing their payloads), re-keys half of them (index churn), deletes some,
-- runs grouped and joined selects, and prints checksums: deterministic (no random(), no
-- clock). ~1 s on one core. The row count can be lowered without editing the file
-- (profile.sh does so for the slowest peers):
--   sqlite3 :memory: ".parameter set @rows 10000" ".read sqlite.sql"
PRAGMA cache_size = -65536;

CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    k TEXT NOT NULL,
    grp INTEGER NOT NULL,
    score INTEGER NOT NULL,
    payload TEXT NOT NULL
);

WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < coalesce(@rows, 200000))
INSERT INTO items (id, k, grp, score, payload)
SELECT n,
       printf('key-%08x', (n * 2654435761) % 4294967296),
       n % 257,
       (n * 7919) % 100003,
       substr(hex(zeroblob(20 + n % 60)), 1, 40 + n % 120)
FROM seq;

CREATE INDEX items_k ON items (k);
CREATE INDEX items_grp_score ON items (grp, score);

UPDATE items SET payload = payload || printf('-%d-', score) || substr(payload, 1, 30),
                 score = score + 1
WHERE id % 4 = 0;

UPDATE items SET k = k || printf('-%03d', grp) WHERE grp < 128;

DELETE FROM items WHERE id % 10 = 7;

SELECT 'rows', count(*), sum(length(payload)) FROM items;

SELECT 'groups', count(*), sum(c), sum(m) FROM (
    SELECT grp, count(*) AS c, max(score) AS m FROM items GROUP BY grp
);

SELECT 'lookup', count(*), sum(i.score) FROM items i
WHERE i.k IN (SELECT k FROM items WHERE id % 97 = 0);

CREATE TABLE totals AS
    SELECT grp, sum(score) AS s, group_concat(substr(k, 5, 3), ',') AS ks
    FROM items WHERE score % 3 = 0 GROUP BY grp;

SELECT 'join', count(*), sum(t.s % 1000), sum(length(t.ks)) FROM totals t
JOIN items i ON i.grp = t.grp AND i.score < 500;

SELECT 'sorted', sum(x) FROM (
    SELECT length(payload) * (score % 13) AS x FROM items ORDER BY k DESC LIMIT 50000
);
