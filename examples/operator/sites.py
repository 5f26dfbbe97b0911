"""An operator in plain Python: the ``StaticSite`` kind and its controller, no provider.

A site has a title, pages (a file name and its body each) and an optional bucket. The
kind declares what a CRD would (its API group and version, short names, the columns
``reconcile get`` shows) and its admission chain: a mutating hook that defaults and
normalises (the title defaulted from the name, the pages sorted by name), and a
validating hook that refuses a bad page name, or a site whose title another site already
has (a rule across objects, read through the client).

Its controller turns one site into the lower-level objects of the built-in providers,
by server-side apply under the field manager ``site-controller``: a ``Directory`` named
after the site, one ``File`` per page in it (and, when the site names a bucket, a
``Bucket`` and one ``Object`` per page). Each child has the site as its controller
(an owner reference); a page removed from the site is a child no longer declared, which
the pass deletes; a child edited by hand is put back; deleting the site deletes them
(or orphans them) as the deletion's propagation policy says. See
``docs/how-to/write-an-operator.md``.

Run it inside a service::

    async with reconcile.Runtime("sqlite:///sites.db", operators=[operator]) as runtime:
        await runtime.apply(manifest)

or install it (``pip install .`` here: the ``reconcile.providers`` entry point names
``sites:operator``) and the CLI knows the kind (``reconcile get sites``) and
``reconcile run`` runs its controller.
"""

from __future__ import annotations

import html
import re
from typing import Any

import attrs

import reconcile
from reconcile.errors import FieldError
from reconcile_providers.files import DIRECTORY, FILE
from reconcile_providers.s3 import BUCKET, OBJECT


@attrs.frozen
class StaticSiteSpec:
    """A static web site: a title and its pages (a file name and its body each)."""

    title: str = reconcile.doc_field("The site's title; defaults to its name, capitalised.", default="")
    pages: dict[str, str] = reconcile.doc_field(  # noqa: RUF009 - an attrs field, its default a Factory
        "The pages: file name (index.html) to body (HTML).", default=attrs.Factory(dict)
    )
    bucket: str | None = reconcile.doc_field("An S3 bucket to publish to as well, if any.", default=None)


@attrs.frozen
class StaticSiteStatus(reconcile.Status):
    """What the controller last did: the pages it published, its children ready."""

    pages: int = 0
    ready_children: int = 0


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

#: The field manager the controller applies the children under (their ``managedFields``
#: and the ``actor`` of their events in ``history``).
MANAGER = "site-controller"

#: A page's file name: lower-case letters, digits, dots and dashes (it names the child too).
_PAGE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


@SITE.mutating
def normalise(request: reconcile.AdmissionRequest) -> StaticSiteSpec:
    """Defaults and canonical form: a title from the name, the pages sorted by name."""
    spec: StaticSiteSpec = request.spec
    title = spec.title or request.object.metadata.name.replace("-", " ").capitalize()
    return attrs.evolve(spec, title=title, pages=dict(sorted(spec.pages.items())))


@SITE.validating(timeout=5)
async def unique_title(request: reconcile.AdmissionRequest) -> list[FieldError]:
    """Page names a file and an object can have; two sites may not share a title (a rule
    across objects: the others are read, when the title is new or changing)."""
    errors = [
        FieldError(f"spec.pages[{page!r}]", "a page is a file name of a-z, 0-9, '.' and '-'")
        for page in request.spec.pages
        if not _PAGE.fullmatch(page)
    ]
    name, namespace, title = (
        request.object.metadata.name,
        request.object.metadata.namespace,
        request.spec.title,
    )
    try:
        stored = await request.client.get(SITE, name, namespace=namespace)
    except reconcile.NotFoundError:
        stored = None
    if stored is not None and stored.spec.title == title:
        return errors  # the title is not changing: no need to read every other site
    others = await request.client.list(SITE, namespace=namespace)
    errors += [
        FieldError("spec.title", f"{title!r} is already the title of site {other.metadata.name}")
        for other in others.items
        if other.metadata.name != name and other.spec.title == title
    ]
    return errors


def render(site: reconcile.Resource[StaticSiteSpec, Any], page: str) -> str:
    """A page as the site publishes it: its body under the site's title."""
    title = html.escape(site.spec.title)
    return f"<!doctype html>\n<title>{title}</title>\n{site.spec.pages[page]}\n"


def children_of(site: reconcile.Resource[StaticSiteSpec, Any]) -> list[dict[str, Any]]:
    """The children a site declares: its Directory and a File per page (the folder is
    named after the site, under the files provider's first root), and with a bucket, the
    Bucket and an Object per page. Only what the site decides is declared: whatever
    the providers default is theirs."""
    name = site.metadata.name

    def child(kind: reconcile.Kind, child_name: str, spec: dict[str, Any]) -> dict[str, Any]:
        metadata = {"name": child_name, "labels": {"sites.example.dev/site": name}}
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}

    declared = [child(DIRECTORY, name, {"path": name})]
    declared += [
        child(FILE, f"{name}.{page}", {"path": f"{name}/{page}", "content": render(site, page)})
        for page in site.spec.pages
    ]
    if site.spec.bucket is not None:
        bucket = site.spec.bucket
        declared.append(child(BUCKET, bucket, {"bucket": bucket, "forceDestroy": True}))
        declared += [
            child(
                OBJECT,
                f"{name}.{page}",
                {"bucket": bucket, "key": page, "content": render(site, page), "contentType": "text/html"},
            )
            for page in site.spec.pages
        ]
    return declared


def _ready(child: reconcile.Resource[Any, Any]) -> bool:
    """Whether a child is Ready for its generation (the spec just applied, not an older one)."""
    status = child.status
    if not isinstance(status, reconcile.Status) or status.observed_generation != child.metadata.generation:
        return False
    condition = status.condition("Ready")
    return condition is not None and condition.status is reconcile.ConditionStatus.TRUE


@operator.controller(SITE, manager=MANAGER, owns=[DIRECTORY, FILE, BUCKET, OBJECT])
async def reconcile_site(request: reconcile.Request, context: reconcile.Context) -> None:
    """Declare the site's children (the others it controls are deleted on leaving the
    block), then say in status how many are ready: Ready once all are."""
    try:
        site = await context.client.get(request.key)
    except reconcile.NotFoundError:
        return  # deleted: the garbage collector has its children
    if site.metadata.deletion_timestamp is not None:
        return  # being deleted: declaring children now would only have them collected again
    async with context.children(site) as children:
        applied = [await children.apply(manifest) for manifest in children_of(site)]
    ready = sum(1 for child in applied if _ready(child))
    generation, done = site.metadata.generation, ready == len(applied)
    message = f"{ready} of {len(applied)} children ready"
    conditions = (
        reconcile.Condition(
            "Ready",
            reconcile.ConditionStatus.TRUE if done else reconcile.ConditionStatus.FALSE,
            "Published" if done else "Publishing",
            message,
            observed_generation=generation,
        ),
        reconcile.Condition(
            "Synced", reconcile.ConditionStatus.TRUE, "ReconcileSuccess", observed_generation=generation
        ),
    )
    status = StaticSiteStatus(
        observed_generation=generation,
        conditions=conditions,
        pages=len(site.spec.pages),
        ready_children=ready,
    )
    if status != site.status:
        await context.client.update_status(attrs.evolve(site, status=status))


#: What ``reconcile --import sites`` reads when the operator is not installed.
kinds = operator.kinds
