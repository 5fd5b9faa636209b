"""The file spark-submit runs: `cascade-plan analyze ARGS --engine spark` on the cluster's session
(logs/spark_job.py is the job itself):

    spark-submit --master yarn "$(python -c 'import cascade_plan.cli.spark_submit as m; print(m.__file__)')" \\
        'hdfs:///logs/2026-11-29/*.jsonl.gz' --model llama-3-8b --hardware h200 --json > verdict.json
"""

from __future__ import annotations

import sys

from cascade_plan.cli.app import new_app, populate


def main(argv: list[str] | None = None) -> None:
    """`analyze` with the Spark engine, on the arguments spark-submit passes the script."""
    args = list(sys.argv[1:] if argv is None else argv)
    populate(new_app(), only="analyze")(["analyze", *args, "--engine", "spark"])


if __name__ == "__main__":
    main()
