"""The same log aggregation as duck_reader, as a PySpark job, for fleet-scale logs on many machines.

Only DataFrame expressions run on the executors (no Python UDFs), so only the driver needs
cascade-plan. The job reduces the logs to the small per-step, per-node, per-request and per-file
tables; the driver hands them to DuckDB (duck_reader's final step) and prices them like any scan.

Local mode (`cascade-plan analyze LOGS --engine spark`) or on a cluster:

    spark-submit --master yarn "$(python -c 'import cascade_plan.cli.spark_submit as m; print(m.__file__)')" \\
        'hdfs:///logs/2026-11-29/*.jsonl.gz' --model llama-3-8b --hardware h200 --json > verdict.json

Needs the `spark` extra (pip install 'cascade-plan[spark]') and a Java runtime (17 or newer).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cascade_plan.errors import InputError
from cascade_plan.inputs.limits import MAX_DEPTH
from cascade_plan.logs.duck_reader import LogTables, connect, create_tables, fetch_rows
from cascade_plan.logs.sources import LogFile

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# PySpark ships no type information here (pyspark is read as Any): sessions, columns and data frames are Any.


def _session() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("--engine spark needs PySpark: pip install 'cascade-plan[spark]' "
                         "(and a Java runtime)") from None
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise InputError("--engine spark needs a Java runtime (17 or newer) on PATH or in JAVA_HOME")
    # getOrCreate: under spark-submit this is the cluster's session; alone, a local one on every core.
    builder = SparkSession.builder.appName("cascade-plan analyze")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:      # not launched by spark-submit: local mode (or SPARK_MASTER)
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
    spark = (builder.config("spark.ui.showConsoleProgress", "false").config("spark.ui.enabled", "false")
             # the aggregated tables are small: plain toPandas, no pyarrow needed
             .config("spark.sql.execution.arrow.pyspark.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")      # a failed read is reported once, as one line, by read_logs_spark
    return spark


def _schemas() -> tuple[Any, Any]:
    from pyspark.sql import types as T

    seq = T.StructType([T.StructField("request", T.StringType()), T.StructField("group", T.StringType()),
                        T.StructField("shared", T.LongType()), T.StructField("private", T.LongType()),
                        T.StructField("levels", T.ArrayType(T.LongType()))])
    rec = T.StructType([T.StructField("ts", T.DoubleType()), T.StructField("replica", T.StringType()),
                        T.StructField("step", T.LongType()), T.StructField("seqs", T.ArrayType(seq)),
                        T.StructField("batch", T.LongType()), T.StructField("prefix", T.LongType()),
                        T.StructField("siblings", T.LongType()), T.StructField("groups", T.LongType()),
                        T.StructField("private", T.DoubleType()), T.StructField("_corrupt", T.StringType())])
    return seq, rec


def _form(spark: Any, f: LogFile) -> str:
    if f.fmt == "json":
        first = spark.read.text(f.path).where("trim(value) != ''").first()
        try:
            keys = set(json.loads(first.value)) if first else set()
        except (ValueError, TypeError):
            keys = set()
    elif f.fmt == "csv":
        keys = set(spark.read.option("header", True).csv(f.path).columns)
    else:
        keys = set(spark.read.parquet(f.path).columns)
    if "seqs" in keys or "request" in keys:
        return "seq"
    if "batch" in keys:
        return "compact"
    raise InputError("neither log form: a record needs `seqs` (per-sequence form) or `batch`, `prefix`, "
                     "`siblings` (compact form)", file=f.path)


def _levels_bad(F: Any, lv: Any, grp: Any, shared: Any) -> Any:
    return lv.isNotNull() & ((F.size(lv) == 0) | (F.size(lv) > MAX_DEPTH) | (F.size(lv) != F.size(F.split(grp, "/")))
                             | ~F.element_at(lv, -1).eqNullSafe(shared)
                             | F.coalesce(F.exists(lv, lambda v: v.isNull() | (v < 0)), F.lit(False))
                             | (F.array_sort(lv) != lv))


def _seq_bad(F: Any, request: Any, grp: Any, shared: Any, private: Any, levels: Any) -> Any:
    return (request.isNull() | grp.isNull() | shared.isNull() | (shared < 0) | private.isNull() | (private < 0)
            | F.coalesce(_levels_bad(F, levels, grp, shared), F.lit(False)))


def _flat(spark: Any, F: Any, files: list[LogFile]) -> Any:
    paths = [f.path for f in files]
    df = spark.read.option("header", True).csv(paths) if files[0].fmt == "csv" else spark.read.parquet(*paths)
    cols = set(df.columns)

    def col(name: str, cast: str) -> Any:
        return F.expr(f"try_cast(trim(cast(`{name}` AS STRING)) AS {cast})") if name in cols else F.lit(None).cast(cast)

    return df.select(F.input_file_name().alias("file"), *[col(c, t).alias(c) for c, t in (
        ("ts", "double"), ("replica", "string"), ("request", "string"), ("group", "string"), ("shared", "bigint"),
        ("private", "double"), ("batch", "bigint"), ("prefix", "bigint"), ("siblings", "bigint"),
        ("groups", "bigint"))], (F.when(F.col("levels").isNull() | (F.col("levels").cast("string") == ""), None)
                                 .otherwise(F.expr("transform(split(regexp_replace(cast(levels AS STRING), "
                                                   "'[\\\\[\\\\] ]', ''), '[/,]'), "
                                                   "v -> try_cast(v AS BIGINT))")) if "levels" in cols
                                 else F.lit(None).cast("array<bigint>")).alias("levels"))


def _seq_tables(spark: Any, F: Any, files: list[LogFile]) -> list[pd.DataFrame]:
    seq_t, rec_t = _schemas()
    if files[0].fmt == "json":
        raw = (spark.read.schema(rec_t).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
               .json([f.path for f in files]).withColumn("file", F.input_file_name()))
        bad = (F.col("_corrupt").isNotNull() | F.col("ts").isNull() | F.col("replica").isNull() | F.col("seqs").isNull()
               | F.coalesce(F.exists("seqs", lambda x: x.isNull() | _seq_bad(F, x.request, x.group, x.shared, x.private,
                                                                             x.levels)), F.lit(False)))
        raw = raw.withColumn("bad", bad)
        rows = raw.select("file", "ts", "replica", "bad", F.posexplode_outer(
            F.when(F.col("bad") | (F.size("seqs") == 0), F.array(F.lit(None).cast(seq_t))).otherwise(F.col("seqs"))
        ).alias("pos", "q")).select("file", "ts", "replica", "bad", (F.col("pos") + 1).alias("k"),
                                    F.col("q.request").alias("request"), F.col("q.group").alias("grp"),
                                    F.col("q.shared").alias("shared"), F.col("q.private").alias("private"),
                                    F.col("q.levels").alias("levels"))
    else:
        flat = _flat(spark, F, files)
        private = F.col("private").cast("bigint")
        rows = flat.select("file", "ts", "replica", (F.col("ts").isNull() | F.col("replica").isNull() | _seq_bad(
            F, F.col("request"), F.col("group"), F.col("shared"), private, F.col("levels"))).alias("bad"),
            F.lit(1).alias("k"), "request", F.col("group").alias("grp"), "shared", private.alias("private"), "levels")
    lv = rows.withColumn("ends", F.when(F.col("bad"), F.array(F.lit(0).cast("bigint")))
                         .otherwise(F.coalesce(F.col("levels"), F.array(F.col("shared")))))
    lv = lv.withColumn("parts", F.when(F.col("levels").isNull(), F.array(F.col("grp"))).otherwise(F.split("grp", "/")))
    t = lv.select("*", F.posexplode("ends").alias("i0", "end"))
    t = t.withColumn("tokens", F.col("end") - F.when(F.col("i0") > 0, F.element_at("ends", F.col("i0"))).otherwise(0))
    t = t.withColumn("node", F.array_join(F.slice("parts", 1, F.col("i0") + 1), "/")).cache()
    first = (F.col("i0") == 0)
    files_df = t.where(first & (F.col("k") == 1)).groupBy("file").agg(
        F.count("*").alias("records"), F.sum(F.col("bad").cast("int")).alias("malformed"))
    good = t.where(first & ~F.col("bad"))
    steps = good.groupBy("replica", "ts").agg(
        F.count("request").alias("seqs"), F.count(F.when(F.col("shared") > 0, 1)).alias("shared_seqs"),
        F.countDistinct(F.when(F.col("shared") > 0, F.col("grp"))).alias("groups"),
        F.sum("shared").cast("double").alias("ps_prefix_tokens"),
        F.sum("private").cast("double").alias("suffix_tokens"),
        F.max(F.col("shared") + F.col("private")).cast("double").alias("longest_context"),
        F.max("private").cast("double").alias("longest_suffix"))
    nodes = (t.where(~F.col("bad") & (F.col("tokens") > 0)).groupBy("replica", "ts", "i0", "node", "tokens")
             .agg(F.count("*").alias("readers"))
             .groupBy("replica", "ts", (F.col("i0") + 1).alias("lvl"), "tokens")
             .agg(F.count("*").alias("instances"), F.sum("readers").alias("readers")))
    requests = (good.where(F.col("request").isNotNull()).groupBy("replica", "request")
                .agg(F.count("*").alias("steps"),
                     F.greatest(F.min("private") - 1, F.lit(0)).cast("double").alias("private")))
    out = [_frame(d) for d in (files_df, steps, nodes, requests)]
    t.unpersist()
    return out


def _compact_tables(spark: Any, F: Any, files: list[LogFile]) -> list[pd.DataFrame]:
    _, rec_t = _schemas()
    if files[0].fmt == "json":
        df = (spark.read.schema(rec_t).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
              .json([f.path for f in files]).withColumn("file", F.input_file_name()))
        corrupt = F.col("_corrupt").isNotNull()
    else:
        df = _flat(spark, F, files)
        corrupt = F.lit(False)
    g = F.coalesce(F.col("groups"), F.floor(F.col("batch") / F.col("siblings")))
    bad = F.coalesce(corrupt | F.col("ts").isNull() | F.col("replica").isNull() | F.col("batch").isNull()
                     | (F.col("batch") < 1) | F.col("prefix").isNull() | (F.col("prefix") < 0)
                     | F.col("siblings").isNull()
                     | (F.col("siblings") < 1) | F.col("private").isNull() | (F.col("private") < 0)
                     | (F.coalesce(F.col("groups"), F.lit(0)) < 0) | (g * F.col("siblings") > F.col("batch")),
                     F.lit(True))
    df = df.withColumn("bad", bad).withColumn("g", g).cache()
    files_df = df.groupBy("file").agg(F.count("*").alias("records"), F.sum(F.col("bad").cast("int")).alias("malformed"))
    ok = df.where(~F.col("bad"))
    steps = ok.select("replica", "ts", F.col("batch").alias("seqs"),
                      (F.col("g") * F.col("siblings")).alias("shared_seqs"), F.col("g").alias("groups"),
                      (F.col("g") * F.col("siblings") * F.col("prefix")).cast("double").alias("ps_prefix_tokens"),
                      (F.col("batch") * F.col("private")).alias("suffix_tokens"),
                      (F.col("prefix") + F.col("private")).alias("longest_context"),
                      F.col("private").alias("longest_suffix"))
    nodes = ok.where((F.col("prefix") > 0) & (F.col("g") > 0)).select(
        "replica", "ts", F.lit(1).alias("lvl"), F.col("prefix").alias("tokens"), F.col("g").alias("instances"),
        (F.col("g") * F.col("siblings")).alias("readers"))
    out = [_frame(d) for d in (files_df, steps, nodes)]
    df.unpersist()
    return out


def _frame(df: Any) -> pd.DataFrame:
    """Collect a small aggregated Spark table as a pandas frame (without PySpark's pandas bridge)."""
    import pandas as pd

    rows = df.collect()
    return pd.DataFrame([r.asDict() for r in rows], columns=df.columns)


def read_logs_spark(files: list[LogFile]) -> LogTables:
    """Scan with Spark, then finish in DuckDB exactly as duck_reader does. A file Spark cannot read
    (missing, corrupt, no schema to infer) is one line, like DuckDB's."""
    spark = _session()                  # first: it says what is missing (PySpark, Java) in one line
    from pyspark.errors import PySparkException

    try:
        from py4j.protocol import Py4JError
    except ImportError:                 # pragma: no cover - py4j comes with PySpark
        Py4JError = PySparkException
    try:
        return _read_with(spark, files)
    except (PySparkException, Py4JError) as exc:
        java = getattr(exc, "java_exception", None)          # Py4JJavaError: the JVM's own message says why
        text = str(java.toString()) if java is not None else str(exc)
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read this log (Spark): {first[:300]}",
                         file=files[0].path if len(files) == 1 else None) from None


def _read_with(spark: Any, files: list[LogFile]) -> LogTables:
    from pyspark.sql import functions as F

    groups: dict[tuple[str, str], list[LogFile]] = {}
    forms = {}
    for f in files:
        form = _form(spark, f)
        forms[f.path] = form
        groups.setdefault((f.fmt, form), []).append(f)
    con = connect("1GB", None)
    create_tables(con)
    local = {("file:" + f.path if not f.path.startswith("file:") else f.path): f.path for f in files}
    for (fmt, form), fs in groups.items():
        parts = _seq_tables(spark, F, fs) if form == "seq" else _compact_tables(spark, F, fs)
        fdf, sdf, ndf = parts[0], parts[1], parts[2]
        fdf["file"] = [_local_name(p, local) for p in fdf["file"]]
        con.register("fdf", fdf)
        con.register("sdf", sdf)
        con.register("ndf", ndf)
        con.execute("INSERT INTO files SELECT file, records, malformed FROM fdf")
        con.execute("INSERT INTO steps SELECT replica, ts, seqs, shared_seqs, groups, ps_prefix_tokens, suffix_tokens, "
                    "longest_context, longest_suffix FROM sdf")
        con.execute("INSERT INTO nodes SELECT replica, ts, lvl, tokens, instances, readers FROM ndf")
        if form == "seq":
            con.register("rdf", parts[3])
            con.execute("INSERT INTO requests SELECT steps, private FROM rdf")
    tables = fetch_rows(con)
    tables.forms = forms
    return tables


def _local_name(uri: str, local: dict[str, str]) -> str:
    """Spark names files file:/abs/path; give back the name the user passed."""
    for k, v in local.items():
        if uri == k or uri.endswith(str(Path(v).resolve())):
            return v
    return uri
