"""Commands of the fleet room: `fleet`, `profile derive`, `onboard`, `collective`. Thin: the engines are in
``npudoctor.fleet``."""

from __future__ import annotations

from typing import Tuple

import click

from npudoctor.cli import fail_usage


@click.command()
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("--demo", is_flag=True, help="Show a demo fleet made from the shipped scenarios.")
@click.option("--demo-nodes", type=click.IntRange(1, 100000), default=42, show_default=True, hidden=True)
def fleet(paths: Tuple[str, ...], fmt: str, demo: bool, demo_nodes: int) -> None:
    """Many reports or bundles at once: which nodes fail which checks, and version drift.

    PATH: `npudoctor check --format json` reports, bundles (.tar.gz or folders), tar archives of reports, or
    folders holding any of these. Exit 0 when no node fails, 1 when one does, 2 when nothing is readable.
    """
    from npudoctor.fleet import view

    if demo == bool(paths):
        raise fail_usage("give report/bundle PATHs, or --demo (not both)")
    if demo:
        from npudoctor.fleet.demo import fleet_documents

        result = view.from_documents(fleet_documents(demo_nodes))
    else:
        try:
            result = view.build(paths)
        except view.FleetInputError as exc:
            raise fail_usage(str(exc)) from None
    render = {"json": view.render_json, "csv": view.render_csv}.get(fmt, view.render_text)
    click.echo(render(result), nl=False)
    raise click.exceptions.Exit(result.exit_code())
