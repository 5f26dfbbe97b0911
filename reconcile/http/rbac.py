"""Authorization in the shape of Kubernetes RBAC: roles (rules of verbs, API groups,
resources and names) bound to users and groups, read from one YAML file
(``reconcile serve --authorization-config``).

The file holds Kubernetes' own documents (``apiVersion: rbac.authorization.k8s.io/v1``),
as many as wanted, separated by ``---``:

- ``Role`` (in a namespace) and ``ClusterRole``: ``rules``, each with ``verbs``,
  ``apiGroups``, ``resources`` (``files``, ``files/status``, ``*``, ``*/status``,
  ``files/*``) and optionally ``resourceNames``;
- ``RoleBinding`` (grants its role's rules in its own namespace; it may name a
  ``ClusterRole``) and ``ClusterRoleBinding`` (a ``ClusterRole``'s rules everywhere),
  each with ``subjects`` (``User``, ``Group``, ``ServiceAccount``) and a ``roleRef``.

A ``ClusterRole``'s rule may name ``nonResourceURLs`` (``/apis``, ``/apis/*``,
``/health``, ``*``) and their verbs instead of resources: what it grants on the paths
that are not resources (discovery, OpenAPI, ``/health``). As Kubernetes' built-in
``system:discovery`` binding does, every authenticated user may ``get`` those
(:data:`DISCOVERY_URLS`) without a rule; the anonymous user only through one.

Rules only allow; nothing denies. Members of ``system:masters`` may do everything. Unlike
a cluster, a binding naming a role the file does not define is refused at startup (it is a
typo there), as is any unknown field, each with its field path (:class:`ConfigError`).

Without a file, :class:`AllowAuthenticated` applies: every authenticated user may do
everything, and the anonymous user nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

from reconcile.http.authn import MASTERS
from reconcile.http.configfiles import ConfigError, FieldReader, yaml_documents
from reconcile.http.context import Attributes, User
from reconcile.http.tokens import AUTHENTICATED

__all__ = ["DISCOVERY_URLS", "AllowAuthenticated", "Grant", "RbacAuthorizer", "Rule", "load_rbac"]

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
#: The paths every authenticated user may ``get`` (Kubernetes' ``system:discovery``, and
#: our ``/health`` and the web view's helpers, ``/ui/api/kinds`` and ``/ui/api/access``):
#: the patterns of a ``nonResourceURLs`` rule.
DISCOVERY_URLS = frozenset(
    {
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
        "/version",
        "/version/",
        "/health",
        "/ui/api/*",
    }
)


def url_matches(patterns: frozenset[str], path: str) -> bool:
    """Whether ``path`` is one of ``patterns`` (``*`` at the end: any path it begins)."""
    return any(
        pattern == path or (pattern.endswith("*") and path.startswith(pattern[:-1])) for pattern in patterns
    )


class AllowAuthenticated:
    """Every authenticated user may do everything; the anonymous user nothing."""

    def allowed(self, user: User, attributes: Attributes) -> bool:  # noqa: ARG002
        """Whether ``user`` is authenticated."""
        return AUTHENTICATED in user.groups or MASTERS in user.groups


@attrs.frozen
class Rule:
    """One rule of a role: what it allows."""

    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str] = frozenset()
    #: The paths of a non-resource rule (then ``resources`` is empty).
    non_resource_urls: frozenset[str] = frozenset()

    def _resource_matches(self, resource: str, subresource: str | None) -> bool:
        if "*" in self.resources:
            return True
        if subresource is None:
            return resource in self.resources
        return bool({f"{resource}/{subresource}", f"*/{subresource}", f"{resource}/*"} & self.resources)

    def matches(self, attributes: Attributes) -> bool:
        """Whether this rule allows ``attributes``."""
        verb = "*" in self.verbs or attributes.verb in self.verbs
        if attributes.path is not None:  # a non-resource request: only such rules grant it
            return verb and url_matches(self.non_resource_urls, attributes.path)
        return (
            verb
            and ("*" in self.api_groups or attributes.group in self.api_groups)
            and self._resource_matches(attributes.resource, attributes.subresource)
            and (
                not self.resource_names
                or (attributes.name is not None and attributes.name in self.resource_names)
            )
        )


@attrs.frozen
class Grant:
    """A binding resolved: its role's rules, where (None: every namespace), to whom."""

    rules: tuple[Rule, ...]
    namespace: str | None
    users: frozenset[str]
    groups: frozenset[str]

    def applies_to(self, user: User, namespace: str | None) -> bool:
        """Whether this grant's rules are ``user``'s in ``namespace`` (None: cluster scope)."""
        if self.namespace is not None and self.namespace != namespace:
            return False
        return user.name in self.users or not self.groups.isdisjoint(user.groups)


@attrs.frozen
class RbacAuthorizer:
    """Allows what some grant of the user allows; members of ``system:masters`` anything."""

    grants: tuple[Grant, ...]
    #: The grants by subject (``user:NAME``, ``group:NAME``): a request looks at its own only.
    _by_subject: dict[str, list[Grant]] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        by_subject: dict[str, list[Grant]] = {}
        for grant in self.grants:
            subjects = [f"user:{u}" for u in grant.users] + [f"group:{g}" for g in grant.groups]
            for subject in subjects:
                by_subject.setdefault(subject, []).append(grant)
        object.__setattr__(self, "_by_subject", by_subject)

    def _grants_of(self, user: User, namespace: str | None) -> list[Grant]:
        subjects = [f"user:{user.name}", *(f"group:{g}" for g in user.groups)]
        found = {
            id(g): g for s in subjects for g in self._by_subject.get(s, ()) if g.applies_to(user, namespace)
        }
        return list(found.values())

    def allowed(self, user: User, attributes: Attributes) -> bool:
        """Whether a rule bound to ``user`` allows ``attributes``."""
        if MASTERS in user.groups:
            return True
        if (
            attributes.path is not None
            and attributes.verb == "get"
            and AUTHENTICATED in user.groups
            and url_matches(DISCOVERY_URLS, attributes.path)
        ):
            return True
        return any(
            rule.matches(attributes)
            for grant in self._grants_of(user, attributes.namespace)
            for rule in grant.rules
        )

    def rules_for(self, user: User, namespace: str | None) -> list[Rule]:
        """Every rule bound to ``user`` in ``namespace`` (what ``kubectl auth can-i --list`` shows)."""
        if MASTERS in user.groups:
            everything = frozenset({"*"})
            return [
                Rule(everything, everything, everything),
                Rule(everything, frozenset(), frozenset(), non_resource_urls=everything),
            ]
        return [rule for grant in self._grants_of(user, namespace) for rule in grant.rules]


def _non_resource_rule(rule: FieldReader, *, cluster: bool) -> Rule:
    if not cluster:
        raise rule.fail("nonResourceURLs", "only a ClusterRole may name nonResourceURLs")
    for field in ("apiGroups", "resources", "resourceNames"):
        if rule.value.get(field) is not None:
            raise rule.fail(field, "a rule names either nonResourceURLs or resources, not both")
    return Rule(
        frozenset(rule.strings("verbs", required=True)),
        frozenset(),
        frozenset(),
        non_resource_urls=frozenset(rule.strings("nonResourceURLs", required=True)),
    )


def _rules(reader: FieldReader, *, cluster: bool) -> tuple[Rule, ...]:
    rules = []
    for rule in reader.mappings("rules"):
        rule.only(["verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"])
        if rule.value.get("nonResourceURLs") is not None:
            rules.append(_non_resource_rule(rule, cluster=cluster))
            continue
        groups = rule.value.get("apiGroups")
        if groups is None:
            raise rule.fail("apiGroups", 'required (use [""] for the core group, ["*"] for every group)')
        rules.append(
            Rule(
                frozenset(rule.strings("verbs", required=True)),
                frozenset(rule.strings("apiGroups")),
                frozenset(rule.strings("resources", required=True)),
                frozenset(rule.strings("resourceNames")),
            )
        )
    return tuple(rules)


@attrs.frozen
class _Binding:
    reader: FieldReader
    namespace: str | None
    role_kind: str
    role_name: str
    users: frozenset[str]
    groups: frozenset[str]


def _subjects(reader: FieldReader, namespace: str | None) -> tuple[frozenset[str], frozenset[str]]:
    users: set[str] = set()
    groups: set[str] = set()
    subjects = reader.mappings("subjects")
    if not subjects:
        raise reader.fail("subjects", "required (a binding without subjects grants nothing)")
    for subject in subjects:
        subject.only(["kind", "name", "apiGroup", "namespace"])
        kind = subject.string("kind")
        name = subject.string("name")
        if kind == "User":
            users.add(name)
        elif kind == "Group":
            groups.add(name)
        elif kind == "ServiceAccount":
            account_namespace = subject.optional_string("namespace") or namespace
            if account_namespace is None:
                raise subject.fail("namespace", "required for a ServiceAccount in a ClusterRoleBinding")
            users.add(f"system:serviceaccount:{account_namespace}:{name}")
        else:
            raise subject.fail("kind", f"must be User, Group or ServiceAccount, not {kind!r}")
    return frozenset(users), frozenset(groups)


def _documents(path: Path) -> Iterable[tuple[int, FieldReader]]:
    for number, document in enumerate(yaml_documents(path), start=1):
        reader = FieldReader(f"{path}: document {number}", document)
        if reader.value.get("kind") == "List":
            reader.only(["apiVersion", "kind", "items", "metadata"])
            for item in reader.mappings("items"):
                yield number, item
        else:
            yield number, reader


def load_rbac(path: Path | str) -> RbacAuthorizer:
    """The authorizer an RBAC file describes (a :class:`ConfigError` naming the field)."""
    path = Path(path)
    roles: dict[tuple[str, str | None, str], tuple[Rule, ...]] = {}
    bindings: list[_Binding] = []
    for _, reader in _documents(path):
        reader.only(["apiVersion", "kind", "metadata", "rules", "subjects", "roleRef", "aggregationRule"])
        kind = reader.string("kind")
        if kind not in _KINDS:
            raise reader.fail("kind", f"must be one of {', '.join(_KINDS)}, not {kind!r}")
        version = reader.string("apiVersion")
        if version != RBAC_API_VERSION:
            raise reader.fail("apiVersion", f"must be {RBAC_API_VERSION}, not {version!r}")
        metadata = reader.mapping("metadata")
        name = metadata.string("name")
        namespaced = kind in {"Role", "RoleBinding"}
        namespace = metadata.optional_string("namespace")
        if namespaced and namespace is None:
            raise metadata.fail("namespace", f"required for a {kind}")
        if not namespaced and namespace is not None:
            raise metadata.fail("namespace", f"a {kind} is not namespaced")
        if kind in {"Role", "ClusterRole"}:
            if reader.value.get("aggregationRule") is not None:
                raise reader.fail("aggregationRule", "not supported: list the rules")
            key = (kind, namespace, name)
            if key in roles:
                raise metadata.fail("name", f"{kind} {name!r} is defined twice")
            roles[key] = _rules(reader, cluster=kind == "ClusterRole")
            continue
        ref = reader.mapping("roleRef")
        ref.only(["apiGroup", "kind", "name"])
        role_kind = ref.string("kind")
        allowed_kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
        if role_kind not in allowed_kinds:
            raise ref.fail("kind", f"must be {' or '.join(allowed_kinds)}, not {role_kind!r}")
        users, groups = _subjects(reader, namespace)
        bindings.append(_Binding(ref, namespace, role_kind, ref.string("name"), users, groups))
    grants = []
    for binding in bindings:
        role_namespace = binding.namespace if binding.role_kind == "Role" else None
        rules = roles.get((binding.role_kind, role_namespace, binding.role_name))
        if rules is None:
            where = f' in the namespace "{role_namespace}"' if role_namespace else ""
            raise binding.reader.fail(
                "name", f"no {binding.role_kind} {binding.role_name!r}{where} in this file"
            )
        grants.append(Grant(rules, binding.namespace, binding.users, binding.groups))
    if not roles and not bindings:
        raise ConfigError(str(path), "holds no Role, ClusterRole, RoleBinding or ClusterRoleBinding")
    return RbacAuthorizer(tuple(grants))
