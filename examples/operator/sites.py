"""An operator in plain Python: the ``StaticSite`` kind and its controller, no provider.

A site has a title, pages and an optional bucket. The kind declares what a CRD would
(its API group and version, short names, the columns ``reconcile get`` shows) and its
admission chain: a mutating hook that defaults and normalises (a page list sorted, each
page once; the title defaulted from the name), and a validating hook that refuses a
site whose title another site already has (a rule across objects, read through the
client). The controller reports what it saw in status; owning the site's files is
the next step of the how-to (``docs/how-to/write-an-operator.md``).

Run it inside a service::

    async with reconcile.Runtime("sqlite:///sites.db", operators=[operator]) as runtime:
        await runtime.apply(manifest)

or install it (``pip install .`` here: the ``reconcile.providers`` entry point names
``sites:operator``) and the CLI knows the kind (``reconcile get sites``) and
``reconcile run`` runs its controller.
"""

from __future__ import annotations

import attrs

import reconcile
from reconcile.errors import FieldError


@attrs.frozen
class StaticSiteSpec:
    """A static web site: a title and its pages (file names under the site)."""

    title: str = reconcile.doc_field("The site's title; defaults to its name, capitalised.", default="")
    pages: tuple[str, ...] = reconcile.doc_field("The pages, by file name (index.html).", default=())
    bucket: str | None = reconcile.doc_field("An S3 bucket to publish to, if any.", default=None)


@attrs.frozen
class StaticSiteStatus(reconcile.Status):
    """What the controller last saw: the pages it counted."""

    pages: int = 0


SITE = reconcile.Kind(
    "sites.example.dev/v1",
    "StaticSite",
    StaticSiteSpec,
    StaticSiteStatus,
    short_names=("site",),
    printer_columns=[
        reconcile.PrinterColumn("Title", ".spec.title", description="The site's title"),
        reconcile.PrinterColumn("Pages", ".status.pages", type="integer"),
        reconcile.PrinterColumn("Bucket", ".spec.bucket", priority=1),
    ],
)

operator = reconcile.Operator("sites", kinds=[SITE])


@SITE.mutating
def normalise(request: reconcile.AdmissionRequest) -> StaticSiteSpec:
    """Defaults and canonical form: a title from the name, pages sorted, each once."""
    spec: StaticSiteSpec = request.spec
    title = spec.title or request.object.metadata.name.replace("-", " ").capitalize()
    return attrs.evolve(spec, title=title, pages=tuple(sorted(set(spec.pages))))


@SITE.validating(timeout=5)
async def unique_title(request: reconcile.AdmissionRequest) -> list[FieldError]:
    """Two sites may not share a title (a rule across objects: the others are read)."""
    name, title = request.object.metadata.name, request.spec.title
    others = await request.client.list(SITE, namespace=request.object.metadata.namespace)
    for other in others.items:
        if other.metadata.name != name and other.spec.title == title:
            return [FieldError("spec.title", f"{title!r} is already the title of site {other.metadata.name}")]
    return []


@operator.controller(SITE)
async def reconcile_site(request: reconcile.Request, context: reconcile.Context) -> None:
    """Report the site's pages in status, Ready and Synced for its generation."""
    try:
        site = await context.client.get(request.key)
    except reconcile.NotFoundError:
        return  # deleted: nothing of ours to clean up yet
    generation, true = site.metadata.generation, reconcile.ConditionStatus.TRUE
    counted = f"{len(site.spec.pages)} pages"
    conditions = (
        reconcile.Condition("Ready", true, "Counted", counted, observed_generation=generation),
        reconcile.Condition("Synced", true, "ReconcileSuccess", observed_generation=generation),
    )
    status = StaticSiteStatus(
        observed_generation=generation,
        conditions=conditions,
        pages=len(site.spec.pages),
    )
    if status != site.status:
        await context.client.update_status(attrs.evolve(site, status=status))


#: What ``reconcile --import sites`` reads when the operator is not installed.
kinds = operator.kinds
