"""Commands of the fleet room: `fleet`, `profile derive`, `onboard`, `collective`. Thin: the engines are in
``npudoctor.fleet``."""

from __future__ import annotations

from typing import Optional, Tuple

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


@click.group()
def profile() -> None:
    """Node profiles: derive a site profile from a known-good node."""


@profile.command("derive")
@click.argument("source", metavar="BUNDLE|REPORT")
@click.option("-o", "--output", required=True, metavar="site.yaml", help="Where to write it (never overwritten).")
@click.option("--base", metavar="NAME|PATH", help="Profile whose thresholds it keeps (default: the report's).")
@click.option("--name", metavar="NAME", help="The profile's name (default: site-from-HOSTNAME).")
def derive(source: str, output: str, base: Optional[str], name: Optional[str]) -> None:
    """Write a site profile pinning what SOURCE's node is: chips, link widths, versions, OS and kernel.

    `npudoctor check --profile site.yaml` on another node then reports every difference (SITE001-SITE003).
    """
    from npudoctor import api
    from npudoctor.fleet.derive import DeriveError, load_source, write_new
    from npudoctor.fleet.derive import derive as derive_text

    try:
        if base:
            api.load_profile(base)  # a bad base is a usage error now, not when the site profile is used
        document, described = load_source(source, base)
        text = derive_text(document, described, base=base, name=name)
        write_new(output, text)
    except (DeriveError, api.UsageError) as exc:
        raise fail_usage(str(exc)) from None
    pins = sum(1 for line in text.splitlines() if line.startswith("  ") and not line.strip().startswith("#"))
    click.echo(f"wrote {output}: {pins} pinned value(s) from {described}; "
               f"check another node with: npudoctor check --profile {output}")
