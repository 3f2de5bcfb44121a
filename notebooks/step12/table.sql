-- The README's table from results.db: the latest measured and simulated step12-2core runs side
-- by side. sqlite3 -header -column results.db < table.sql
-- m_/s_: measured / simulated; *_x: divided by pumaplus-peak-w3t4's; step_p99: the worst
-- per-second p99 (by arrival second) of t = 20..22 s, the step's first three seconds; s_over:
-- seconds of the 240 rps phase whose p99 is over the 150 ms SLO; mem: time-average sum of PSS.
WITH m AS (SELECT max(run_id) AS id FROM runs WHERE kind = 'measured' AND scenario = 'step12-2core'),
     s AS (SELECT max(run_id) AS id FROM runs WHERE kind = 'simulated' AND scenario = 'step12-2core'),
     mv AS (SELECT v.*, c.config_id AS cid, b.avg_pss_bytes, b.avg_uss_bytes, b.avg_rss_bytes, b.activations,
                   b.activation_p50_ms, b.activation_max_ms
            FROM v_summary v JOIN configs c ON c.config_id = (SELECT config_id FROM configs
                 WHERE run_id = v.run_id AND name = v.config)
            LEFT JOIN bench_measure b ON b.config_id = c.config_id
            WHERE v.run_id = (SELECT id FROM m)),
     sv AS (SELECT v.*, (SELECT config_id FROM configs WHERE run_id = v.run_id AND name = v.config) AS cid
            FROM v_summary v WHERE run_id = (SELECT id FROM s)),
     mstatic AS (SELECT p99_ms, avg_memory_bytes FROM mv WHERE config = 'pumaplus-peak-w3t4'),
     sstatic AS (SELECT p99_ms, avg_memory_bytes FROM sv WHERE config = 'pumaplus-peak-w3t4')
SELECT mv.config,
       printf('%.0f', (SELECT max(t.p99_ms) FROM timeline t WHERE t.config_id = mv.cid AND t.t_s BETWEEN 20 AND 22)) AS m_step_p99,
       (SELECT count(*) FROM timeline t WHERE t.config_id = mv.cid AND t.t_s BETWEEN 20 AND 49 AND t.p99_ms > 150) AS m_s_over,
       printf('%.1f', mv.p99_ms) AS m_p99_ms,
       printf('%.2f', mv.p99_ms / (SELECT p99_ms FROM mstatic)) AS m_p99_x,
       printf('%.1f/%.1f', mv.achieved_rps, mv.offered_rps) AS m_rps,
       printf('%.1f', mv.avg_workers) AS m_avg_w,
       printf('%.1f', mv.avg_memory_bytes / 1e6) AS m_pss_mb,
       printf('%.1f', mv.avg_rss_bytes / 1e6) AS m_rss_mb,
       printf('%.2f', mv.avg_memory_bytes / (SELECT avg_memory_bytes FROM mstatic)) AS m_mem_x,
       ifnull(mv.activations, '-') AS acts,
       CASE WHEN mv.activation_p50_ms IS NULL THEN '-' ELSE printf('%.1f', mv.activation_p50_ms) END AS act_p50,
       CASE WHEN mv.activation_max_ms IS NULL THEN '-' ELSE printf('%.1f', mv.activation_max_ms) END AS act_max,
       printf('%.1f', sv.p99_ms) AS s_p99_ms,
       printf('%.0f', (SELECT max(t.p99_ms) FROM timeline t WHERE t.config_id = sv.cid AND t.t_s BETWEEN 20 AND 22)) AS s_step_p99,
       printf('%.2f', sv.p99_ms / (SELECT p99_ms FROM sstatic)) AS s_p99_x,
       printf('%.1f', sv.avg_memory_bytes / 1e6) AS s_mem_mb,
       printf('%.2f', sv.avg_memory_bytes / (SELECT avg_memory_bytes FROM sstatic)) AS s_mem_x
FROM mv JOIN sv ON sv.config = mv.config ORDER BY mv.config_id;
