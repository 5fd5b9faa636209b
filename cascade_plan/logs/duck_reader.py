"""Read batch logs with DuckDB and aggregate them to per-step load tables (one streaming scan per
group of files of one format and form; DuckDB parallelises, decompresses and spills to disk).

The result is small: one row per (replica, step), one per (replica, step, level, node length) and
one per request. Rows that break a rule of the format are counted per file, never used; where
they are is found afterwards by `bad_lines` (the scan itself cannot number lines)."""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from cascade_plan.errors import InputError
from cascade_plan.inputs.limits import MAX_CONTEXT_TOKENS as MAX_TOKENS
from cascade_plan.inputs.limits import MAX_DEPTH, MAX_SEQUENCES
from cascade_plan.logs.log_format import MAX_TS_S
from cascade_plan.logs.sources import LogFile

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

SEQ_TYPE = 'STRUCT(request VARCHAR, "group" VARCHAR, shared BIGINT, private BIGINT, levels BIGINT[])'
# Counts are read as JSON and kept only when the JSON value is an integer: a typed read would round 64.7
# to 65 and take "64" or true as 64 and 1. Anything else becomes -1, which every rule below refuses.
RAW_SEQ_TYPE = 'STRUCT(request VARCHAR, "group" VARCHAR, shared JSON, private JSON, levels JSON[])'
JSON_COLUMNS = ("{ts: 'DOUBLE', replica: 'VARCHAR', step: 'BIGINT', seqs: '" + RAW_SEQ_TYPE + "[]', batch: 'JSON', "
                "prefix: 'JSON', siblings: 'JSON', groups: 'JSON', private: 'DOUBLE'}")


def json_int(v: str) -> str:
    """SQL: a JSON value as BIGINT when it is a JSON integer, NULL when missing or null, else -1 (refused)."""
    return (f"(CASE WHEN {v} IS NULL OR json_type({v}) = 'NULL' THEN NULL WHEN json_type({v}) IN ('UBIGINT', 'BIGINT') "
            f"THEN try_cast({v} AS BIGINT) ELSE -1 END)")


TYPED_SEQS = (f'list_transform(seqs, lambda x: struct_pack(request := x.request, "group" := x."group", '
              f"shared := {json_int('x.shared')}, private := {json_int('x.private')}, "
              f"levels := list_transform(x.levels, lambda v: {json_int('v')})))")


def _levels_bad(lv: str, grp: str, shared: str) -> str:
    return (f"({lv} IS NOT NULL AND (len({lv}) = 0 OR len({lv}) > {MAX_DEPTH} "
            f"OR len({lv}) != len(string_split({grp}, '/')) "
            f"OR {lv}[-1] IS DISTINCT FROM {shared} "
            f"OR coalesce(list_bool_or(list_transform({lv}, lambda v: v IS NULL OR v < 0)), false) "
            f"OR list_sort({lv}) != {lv}))")


def seq_bad(x: str = "") -> str:
    """SQL: a sequence row breaks a rule (the rules of log_format.Seq)."""
    p = f"{x}." if x else ""
    grp = f'{p}"group"' if x else "grp"
    return (f"({p}request IS NULL OR {grp} IS NULL OR {p}shared IS NULL OR {p}shared < 0 OR {p}private IS NULL "
            f"OR {p}private < 0 OR {p}shared > {MAX_TOKENS} OR {p}private > {MAX_TOKENS} "
            f"OR {_levels_bad(p + 'levels', grp, p + 'shared')})")


HEAD_BAD = f"(ts IS NULL OR replica IS NULL OR NOT (abs(ts) <= {MAX_TS_S}))"      # NOT (...): NaN and inf too
JSON_STEP_BAD = (f"({HEAD_BAD} OR seqs IS NULL OR "
                 f"coalesce(list_bool_or(list_transform(seqs, lambda x: x IS NULL OR {seq_bad('x')})), false))")
COMPACT_BAD = (f"({HEAD_BAD} OR batch IS NULL OR batch < 1 OR prefix IS NULL OR prefix < 0 OR siblings IS NULL "
               f"OR siblings < 1 OR private IS NULL OR NOT (private BETWEEN 0 AND {MAX_TOKENS}) "
               f"OR batch > {MAX_SEQUENCES} OR siblings > {MAX_SEQUENCES} OR prefix > {MAX_TOKENS} "
               f"OR coalesce(groups, 0) < 0 OR coalesce(groups, 0) > {MAX_SEQUENCES} "
               # every OR is evaluated: no // 0, no overflow
               "OR coalesce(groups, batch // nullif(siblings, 0))::DOUBLE * siblings > batch)")


@dataclass
class LogTables:
    """What the scan leaves for the cost model (numpy arrays; steps sorted by replica, ts)."""

    replica: np.ndarray            # (S,) str
    ts: np.ndarray                 # (S,) s
    seqs: np.ndarray               # (S,) sequences in the step
    shared_seqs: np.ndarray        # sequences sharing any prefix
    groups: np.ndarray             # sibling groups (distinct innermost shared nodes)
    ps_prefix_tokens: np.ndarray   # shared tokens summed over sequences
    suffix_tokens: np.ndarray      # private tokens summed over sequences
    longest_context: np.ndarray
    longest_suffix: np.ndarray
    node_step: np.ndarray          # (N,) step index of a node bucket (one level, one node length)
    node_level: np.ndarray         # 1-based cascade level
    node_tokens: np.ndarray        # tokens of one node of the bucket
    node_instances: np.ndarray     # nodes of that length at that level in the step
    node_readers: np.ndarray       # sequences reading them, summed over the nodes
    request_steps: np.ndarray      # (R,) decode steps each request appears in
    request_private: np.ndarray    # private tokens at its first logged step, less the one being decoded
    files: list[tuple[str, int, int]] = field(default_factory=list)   # (file, records, malformed)
    forms: dict[str, str] = field(default_factory=dict)               # file -> "seq" | "compact"

    @property
    def steps(self) -> int:
        return int(self.ts.size)


def connect(memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(config={"memory_limit": memory_limit, "preserve_insertion_order": False,
                                 "temp_directory": tempfile.gettempdir() + "/cascade-plan-duckdb"})
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    # progress is tracked (query_progress) but never printed by DuckDB: the CLI draws its own bar on stderr
    con.execute("SET enable_progress_bar = true; SET enable_progress_bar_print = false; SET progress_bar_time = 0")
    return con


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The four tables a reader fills and `fetch_rows` reads (steps, nodes, requests, files), empty."""
    con.execute("CREATE TEMP TABLE steps (replica VARCHAR, ts DOUBLE, seqs BIGINT, shared_seqs BIGINT, groups BIGINT, "
                "ps_prefix_tokens DOUBLE, suffix_tokens DOUBLE, longest_context DOUBLE, longest_suffix DOUBLE)")
    con.execute("CREATE TEMP TABLE nodes (replica VARCHAR, ts DOUBLE, lvl BIGINT, tokens BIGINT, instances BIGINT, "
                "readers BIGINT)")
    con.execute("CREATE TEMP TABLE requests (steps BIGINT, private DOUBLE)")
    con.execute("CREATE TEMP TABLE files (file VARCHAR, records BIGINT, malformed BIGINT)")


def _columns(con: duckdb.DuckDBPyConnection, f: LogFile) -> dict[str, str]:
    """Column name -> DuckDB type of a CSV/Parquet file; for JSON, the keys of its first record."""
    if f.fmt == "json":
        row = con.execute("SELECT json_keys(json) FROM read_json_objects(?, format='newline_delimited', "
                          "ignore_errors=true) WHERE json IS NOT NULL LIMIT 1", [f.path]).fetchone()
        return {k: "JSON" for k in (row[0] if row else [])}
    fn = "read_csv" if f.fmt == "csv" else "read_parquet"
    opts = ", all_varchar=true, header=true" if f.fmt == "csv" else ""
    rows = con.execute(f"DESCRIBE SELECT * FROM {fn}(?{opts})", [f.path]).fetchall()
    return {r[0]: r[1] for r in rows}


def form_of(con: duckdb.DuckDBPyConnection, f: LogFile) -> tuple[str, dict[str, str]]:
    import duckdb

    try:
        cols = _columns(con, f)
    except duckdb.Error as exc:          # not gzip / zstd / Parquet after all, unreadable, ...
        if interrupt_query(exc):
            raise
        raise InputError(f"cannot read this log: {str(exc).splitlines()[0]}", file=f.path) from None
    if "seqs" in cols or "request" in cols:
        return "seq", cols
    if "batch" in cols:
        return "compact", cols
    if not cols:
        raise InputError("no records in this log", file=f.path)
    raise InputError("neither log form: a record needs `seqs` (per-sequence form) or `batch`, `prefix`, "
                     f"`siblings` (compact form); found {', '.join(sorted(cols)) or 'nothing'}", file=f.path)


def _flat_source(files: list[LogFile], cols: dict[str, str]) -> str:
    paths = "[" + ", ".join("'" + f.path.replace("'", "''") + "'" for f in files) + "]"
    if files[0].fmt == "csv":
        return f"read_csv({paths}, all_varchar=true, header=true, filename=true, union_by_name=true)"
    return f"read_parquet({paths}, filename=true, union_by_name=true)"


def _col(cols: dict[str, str], name: str, cast: str) -> str:
    # trim(): DuckDB would otherwise push a bare cast into the CSV reader, which then fails on the row
    if name not in cols:
        return f"NULL::{cast}"
    text = f'trim("{name}"::VARCHAR)'
    if cast == "BIGINT":       # a count: a whole number ("64", or 64.0 from a float column), never 64.7 rounded to 65
        return (f"(CASE WHEN {text} IS NULL OR {text} = '' THEN NULL "
                f"WHEN regexp_full_match({text}, '[+-]?[0-9]+(\\.0*)?') "
                f"THEN try_cast(try_cast({text} AS DOUBLE) AS BIGINT) "
                "ELSE -1 END)")
    return f"try_cast({text} AS {cast})"


def seq_rows_sql(files: list[LogFile], cols: dict[str, str]) -> str:
    """One row per (record, sequence): file, ts, replica, bad, k (1 for a record's first row), request,
    grp, shared, private, levels (BIGINT[] or NULL)."""
    if files[0].fmt == "json":
        paths = "[" + ", ".join("'" + f.path.replace("'", "''") + "'" for f in files) + "]"
        return f"""
        SELECT file, ts, replica, bad, k, q.request AS request, q."group" AS grp, q.shared AS shared,
               q.private AS private, q.levels AS levels
        FROM (SELECT filename AS file, ts, replica, bad,
                     unnest(CASE WHEN bad OR len(seqs) = 0 THEN [NULL::{SEQ_TYPE}] ELSE seqs END) AS q,
                     unnest(range(1, CASE WHEN bad THEN 2 ELSE greatest(len(seqs), 1) + 1 END)) AS k
              FROM (SELECT filename, ts, replica, seqs, {JSON_STEP_BAD} AS bad
                    FROM (SELECT filename, ts, replica, {TYPED_SEQS} AS seqs
                          FROM read_json({paths}, format='newline_delimited', ignore_errors=true, filename=true,
                                         columns={JSON_COLUMNS}))))"""
    lv = cols.get("levels", "")
    if not lv:
        levels = "NULL::BIGINT[]"
    elif lv.endswith("[]"):
        levels = "try_cast(levels AS BIGINT[])"
    else:
        levels = ("CASE WHEN levels IS NULL OR levels = '' THEN NULL ELSE "
                  "list_transform(string_split(levels, '/'), lambda v: try_cast(v AS BIGINT)) END")
    return f"""
        SELECT file, ts, replica, {HEAD_BAD} OR {seq_bad()} AS bad, 1 AS k, request, grp, shared, private, levels
        FROM (SELECT filename AS file, {_col(cols, 'ts', 'DOUBLE')} AS ts,
                     {_col(cols, 'replica', 'VARCHAR')} AS replica,
                     {_col(cols, 'request', 'VARCHAR')} AS request, {_col(cols, 'group', 'VARCHAR')} AS grp,
                     {_col(cols, 'shared', 'BIGINT')} AS shared, {_col(cols, 'private', 'BIGINT')} AS private,
                     {levels} AS levels
              FROM {_flat_source(files, cols)})"""


GROUP_COLS = ("file", "replica", "ts", "i", "node", "tokens", "request")


def gid(*grouped: str) -> int:
    """DuckDB's GROUPING(GROUP_COLS) of a grouping set: a set bit for every column not grouped."""
    return sum(1 << (len(GROUP_COLS) - 1 - n) for n, c in enumerate(GROUP_COLS) if c not in grouped)


G_FILE, G_STEP, G_NODE, G_REQUEST = (gid("file"), gid("replica", "ts"), gid("replica", "ts", "i", "node", "tokens"),
                                     gid("replica", "request"))


def seq_aggregate_sql(rows_sql: str) -> str:
    """Grouping sets over the sequence rows unnested per level: per file (records, malformed), per
    step, per (step, level, node) and per request, in one scan."""
    return f"""
    WITH r AS ({rows_sql}),
    lv AS (SELECT *, CASE WHEN bad THEN [0] ELSE coalesce(levels, [shared]) END AS ends,
                  CASE WHEN levels IS NULL THEN [grp] ELSE string_split(grp, '/') END AS parts FROM r),
    n AS (SELECT *, unnest(range(1, len(ends) + 1)) AS i FROM lv),
    t AS (SELECT *, array_to_string(parts[1:i], '/') AS node,
                 ends[i] - CASE WHEN i > 1 THEN ends[i - 1] ELSE 0 END AS tokens FROM n)
    SELECT GROUPING({', '.join(GROUP_COLS)}) AS gid, file, replica, ts, i, node, tokens, request,
           count(*) FILTER (WHERE i = 1 AND k = 1) AS records,
           count(*) FILTER (WHERE i = 1 AND k = 1 AND bad) AS malformed,
           count(*) FILTER (WHERE i = 1 AND NOT bad AND request IS NOT NULL) AS seqs,
           count(*) FILTER (WHERE i = 1 AND NOT bad AND shared > 0) AS shared_seqs,
           count(DISTINCT grp) FILTER (WHERE i = 1 AND NOT bad AND shared > 0) AS groups,
           sum(shared) FILTER (WHERE i = 1 AND NOT bad) AS ps_prefix_tokens,
           sum(private) FILTER (WHERE i = 1 AND NOT bad) AS suffix_tokens,
           max(shared + private) FILTER (WHERE i = 1 AND NOT bad) AS longest_context,
           max(private) FILTER (WHERE i = 1 AND NOT bad) AS longest_suffix,
           count(*) FILTER (WHERE NOT bad AND tokens > 0) AS readers,
           min(private) FILTER (WHERE i = 1 AND NOT bad) AS first_private
    FROM t
    GROUP BY GROUPING SETS ((file), (replica, ts), (replica, ts, i, node, tokens), (replica, request))"""


def compact_rows_sql(files: list[LogFile], cols: dict[str, str]) -> str:
    if files[0].fmt == "json":
        paths = "[" + ", ".join("'" + f.path.replace("'", "''") + "'" for f in files) + "]"
        src = (f"SELECT filename AS file, ts, replica, {json_int('batch')} AS batch, {json_int('prefix')} AS prefix, "
               f"{json_int('siblings')} AS siblings, {json_int('groups')} AS groups, private FROM read_json("
               f"{paths}, format='newline_delimited', ignore_errors=true, filename=true, columns={JSON_COLUMNS})")
    else:
        src = (f"SELECT filename AS file, {_col(cols, 'ts', 'DOUBLE')} AS ts, "
               f"{_col(cols, 'replica', 'VARCHAR')} AS replica, "
               f"{_col(cols, 'batch', 'BIGINT')} AS batch, {_col(cols, 'prefix', 'BIGINT')} AS prefix, "
               f"{_col(cols, 'siblings', 'BIGINT')} AS siblings, {_col(cols, 'groups', 'BIGINT')} AS groups, "
               f"{_col(cols, 'private', 'DOUBLE')} AS private FROM {_flat_source(files, cols)}")
    return f"SELECT *, {COMPACT_BAD} AS bad FROM ({src})"


def _run_with_progress(con: duckdb.DuckDBPyConnection, sql: str,
                       progress: Callable[[float], None] | None) -> duckdb.DuckDBPyConnection:
    """Run a statement while a thread reports DuckDB's query progress (0..100)."""
    if progress is None:
        return con.execute(sql)
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.25):
            try:
                p = con.query_progress()
            except Exception:      # noqa: BLE001 - progress is cosmetic
                return
            if p is not None and p >= 0:
                progress(p)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    try:
        return con.execute(sql)
    finally:
        done.set()
        th.join()


def interrupt_query(exc: BaseException) -> bool:
    """DuckDB reports Ctrl-C during a query as an error ("Query interrupted", "INTERRUPT Error")."""
    return "interrupt" in str(exc).lower() or type(exc).__name__ == "InterruptException"


def read_logs(files: list[LogFile], *, memory_limit: str = "1GB", threads: int | None = None,
              progress: Callable[[str, float], None] | None = None) -> LogTables:
    """Scan every file (grouped by format and form) and return the aggregated tables. Ctrl-C during the
    scan is a KeyboardInterrupt (the CLI's one line and exit 130), never a query error."""
    import duckdb

    try:
        return _read_logs(files, memory_limit, threads, progress)
    except (RuntimeError, duckdb.Error) as exc:
        if not interrupt_query(exc):
            raise
    raise KeyboardInterrupt


def require_steps(tables: LogTables, files: list[LogFile]) -> LogTables:
    """The tables, when at least one decode step was well formed; else the one line `analyze` gives."""
    if tables.steps == 0:
        raise InputError("no valid decode step in the log(s)" + (f" ({sum(m for *_, m in tables.files)} malformed)"
                                                                  if tables.files else ""), file=files[0].path)
    return tables


def _read_logs(files: list[LogFile], memory_limit: str, threads: int | None,
               progress: Callable[[str, float], None] | None) -> LogTables:
    import duckdb

    try:
        con = connect(memory_limit, threads)
    except duckdb.Error as exc:
        raise InputError(f"--memory-limit / --threads: DuckDB refused them: {str(exc).splitlines()[0]}") from None
    groups: dict[tuple[str, str, tuple], list[LogFile]] = {}
    forms = {}
    for f in files:
        form, cols = form_of(con, f)
        forms[f.path] = form
        key_cols = tuple(sorted(cols.items())) if f.fmt != "json" else ()
        groups.setdefault((f.fmt, form, key_cols), []).append(f)
    create_tables(con)
    for n, ((fmt, form, key_cols), fs) in enumerate(groups.items()):
        cols = dict(key_cols)
        label = f"{len(fs)} file(s)" + (f", part {n + 1} of {len(groups)}" if len(groups) > 1 else "")
        report = (lambda p, label=label: progress(label, p)) if progress else None
        try:
            if form == "seq":
                _run_with_progress(con, "CREATE OR REPLACE TEMP TABLE agg AS "
                                   + seq_aggregate_sql(seq_rows_sql(fs, cols)), report)
                con.execute(f"INSERT INTO files SELECT file, records, malformed FROM agg WHERE gid = {G_FILE}")
                con.execute("INSERT INTO steps SELECT replica, ts, seqs, shared_seqs, groups, ps_prefix_tokens, "
                            "suffix_tokens, "
                            f"longest_context, longest_suffix FROM agg WHERE gid = {G_STEP} AND records > malformed")
                con.execute("INSERT INTO nodes SELECT replica, ts, i, tokens, count(*), sum(readers) FROM agg "
                            f"WHERE gid = {G_NODE} AND tokens > 0 AND readers > 0 GROUP BY ALL")
                con.execute("INSERT INTO requests SELECT seqs, greatest(first_private - 1, 0) FROM agg "
                            f"WHERE gid = {G_REQUEST} AND seqs > 0")
            else:
                _run_with_progress(con, "CREATE OR REPLACE TEMP TABLE agg AS " + compact_rows_sql(fs, cols), report)
                con.execute("INSERT INTO files SELECT file, count(*), count(*) FILTER (WHERE bad) FROM agg "
                            "GROUP BY file")
                con.execute("CREATE OR REPLACE TEMP TABLE agg AS SELECT *, "
                            "coalesce(groups, batch // nullif(siblings, 0)) AS g "
                            "FROM agg WHERE NOT bad")
                con.execute("INSERT INTO steps SELECT replica, ts, batch, g * siblings, g, g * siblings * prefix, "
                            "batch * private, prefix + private, private FROM agg")
                con.execute("INSERT INTO nodes SELECT replica, ts, 1, prefix, g, g * siblings FROM agg "
                            "WHERE prefix > 0 AND g > 0")
        except duckdb.Error as exc:
            if interrupt_query(exc):
                raise
            raise InputError(f"cannot read this log: {str(exc).splitlines()[0]}", file=fs[0].path) from None
    tables = fetch_rows(con)
    tables.forms = forms
    return tables


def fetch_rows(con: duckdb.DuckDBPyConnection) -> LogTables:
    # Steps numbered in (replica, ts) order; node buckets carry the step number.
    con.execute("CREATE OR REPLACE TEMP TABLE s AS SELECT *, row_number() OVER (ORDER BY replica, ts) - 1 AS idx "
                "FROM (SELECT replica, ts, sum(seqs) seqs, sum(shared_seqs) shared_seqs, sum(groups) groups, "
                "sum(ps_prefix_tokens) ps_prefix_tokens, sum(suffix_tokens) suffix_tokens, "
                "max(longest_context) longest_context, "
                "max(longest_suffix) longest_suffix FROM steps GROUP BY replica, ts)")
    st = con.execute("SELECT replica, ts, seqs, shared_seqs, groups, ps_prefix_tokens, suffix_tokens, longest_context, "
                     "longest_suffix FROM s ORDER BY idx").fetchnumpy()
    nd = con.execute("SELECT s.idx, n.lvl, n.tokens, sum(n.instances), sum(n.readers) FROM nodes n "
                     "JOIN s USING (replica, ts) GROUP BY ALL ORDER BY 1, 2, 3").fetchnumpy()
    rq = con.execute("SELECT steps, private FROM requests").fetchnumpy()
    files = [tuple(r) for r in con.execute("SELECT file, sum(records)::BIGINT, sum(malformed)::BIGINT FROM files "
                                           "GROUP BY file ORDER BY file").fetchall()]
    f = lambda d, k, t=float: np.asarray(d[k], dtype=t)          # noqa: E731
    nk = list(nd)
    return LogTables(
        replica=np.asarray(st["replica"], dtype=object), ts=f(st, "ts"), seqs=f(st, "seqs"),
        shared_seqs=f(st, "shared_seqs"), groups=f(st, "groups"), ps_prefix_tokens=f(st, "ps_prefix_tokens"),
        suffix_tokens=f(st, "suffix_tokens"), longest_context=f(st, "longest_context"),
        longest_suffix=f(st, "longest_suffix"),
        node_step=f(nd, nk[0], np.int64), node_level=f(nd, nk[1], np.int64), node_tokens=f(nd, nk[2]),
        node_instances=f(nd, nk[3]), node_readers=f(nd, nk[4]),
        request_steps=f(rq, "steps"), request_private=f(rq, "private"), files=files)
