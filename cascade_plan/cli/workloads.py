"""`cascade-plan workloads`: the shipped example workloads, usable by name from any folder."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cascade_plan.cli.common import JsonOpt, print_json
from cascade_plan.envelope import envelope
from cascade_plan.inputs.workload_catalog import shipped_workload
from cascade_plan.render.console import make_console


def workloads(
    path: Annotated[Optional[str], typer.Option(
        "--path", help="Print the file path of this shipped workload (to copy it and edit your own).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List the shipped workloads. Any command takes their name where a workload file goes.

    Examples:

      cascade-plan workloads

      cascade-plan estimate rl-rollouts-64

      cp "$(cascade-plan workloads --path rl-rollouts-64)" my-workload.yaml
    """
    from cascade_plan.inputs.workload_rows import workload_rows

    if path is not None:
        typer.echo(str(shipped_workload(path)))
        return
    rows = workload_rows()
    if json_out:
        print_json(envelope({"workloads": rows}))
        return
    from cascade_plan.render.workload_list import render_workloads

    render_workloads(rows, make_console())


def schema() -> None:
    """Print the JSON Schema of the workload YAML (for editor completion and validation).

    Example: cascade-plan schema > workload.schema.json, then put
    `# yaml-language-server: $schema=workload.schema.json` at the top of a workload file.
    """
    from cascade_plan.inputs.workload_schema import schema_text

    typer.echo(schema_text(), nl=False)
