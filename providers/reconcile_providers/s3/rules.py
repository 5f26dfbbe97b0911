"""Lifecycle and CORS rules between the spec's form and S3's, both ways, so a bucket's
rules can be compared with the declared ones as values (S3 may answer with its own
defaults and its own order: neither is drift)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "cors_from_s3",
    "cors_to_s3",
    "lifecycle_from_s3",
    "lifecycle_to_s3",
    "normal_cors",
    "normal_lifecycle",
]


def normal_lifecycle(rules: Sequence[Any]) -> list[dict[str, Any]]:
    """The declared rules as comparable values, sorted by id, keyed as a document spells
    them (they are reported in ``status.atProvider``)."""
    found = [
        {
            "id": rule.id,
            "enabled": rule.enabled,
            "prefix": rule.prefix or "",
            "tags": dict(sorted(rule.tags.items())),
            "expirationDays": rule.expiration_days,
            "noncurrentExpirationDays": rule.noncurrent_expiration_days,
            "abortIncompleteUploadDays": rule.abort_incomplete_upload_days,
        }
        for rule in rules
    ]
    return sorted(found, key=lambda r: str(r["id"]))


def lifecycle_to_s3(rules: Sequence[Any]) -> list[dict[str, Any]]:
    """S3's LifecycleConfiguration Rules for the declared rules."""
    converted = []
    for rule in rules:
        tags = [{"Key": k, "Value": v} for k, v in sorted(rule.tags.items())]
        if tags and (rule.prefix or len(tags) > 1):
            selector: dict[str, Any] = {"And": {"Prefix": rule.prefix or "", "Tags": tags}}
        elif tags:
            selector = {"Tag": tags[0]}
        else:
            selector = {"Prefix": rule.prefix or ""}
        item: dict[str, Any] = {
            "ID": rule.id,
            "Status": "Enabled" if rule.enabled else "Disabled",
            "Filter": selector,
        }
        if rule.expiration_days is not None:
            item["Expiration"] = {"Days": rule.expiration_days}
        if rule.noncurrent_expiration_days is not None:
            item["NoncurrentVersionExpiration"] = {"NoncurrentDays": rule.noncurrent_expiration_days}
        if rule.abort_incomplete_upload_days is not None:
            item["AbortIncompleteMultipartUpload"] = {
                "DaysAfterInitiation": rule.abort_incomplete_upload_days
            }
        converted.append(item)
    return converted


def lifecycle_from_s3(rules: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """S3's rules in the comparable form of :func:`normal_lifecycle`."""
    found = []
    for rule in rules:
        selector = rule.get("Filter") or {}
        both = selector.get("And") or {}
        prefix = selector.get("Prefix", both.get("Prefix", rule.get("Prefix", ""))) or ""
        tags = both.get("Tags") or ([selector["Tag"]] if "Tag" in selector else [])
        found.append(
            {
                "id": rule.get("ID", ""),
                "enabled": rule.get("Status") == "Enabled",
                "prefix": prefix,
                "tags": dict(sorted((t["Key"], t["Value"]) for t in tags)),
                "expirationDays": (rule.get("Expiration") or {}).get("Days"),
                "noncurrentExpirationDays": (rule.get("NoncurrentVersionExpiration") or {}).get(
                    "NoncurrentDays"
                ),
                "abortIncompleteUploadDays": (rule.get("AbortIncompleteMultipartUpload") or {}).get(
                    "DaysAfterInitiation"
                ),
            }
        )
    return sorted(found, key=lambda r: str(r["id"]))


def normal_cors(rules: Sequence[Any]) -> list[dict[str, Any]]:
    """The declared CORS rules as comparable values, in order (S3 keeps the order)."""
    return [
        {
            "allowedMethods": sorted(rule.allowed_methods),
            "allowedOrigins": sorted(rule.allowed_origins),
            "allowedHeaders": sorted(rule.allowed_headers),
            "exposeHeaders": sorted(rule.expose_headers),
            "maxAgeSeconds": rule.max_age_seconds,
        }
        for rule in rules
    ]


def cors_to_s3(rules: Sequence[Any]) -> list[dict[str, Any]]:
    """S3's CORSRules for the declared rules."""
    converted = []
    for rule in rules:
        item: dict[str, Any] = {
            "AllowedMethods": list(rule.allowed_methods),
            "AllowedOrigins": list(rule.allowed_origins),
        }
        if rule.allowed_headers:
            item["AllowedHeaders"] = list(rule.allowed_headers)
        if rule.expose_headers:
            item["ExposeHeaders"] = list(rule.expose_headers)
        if rule.max_age_seconds is not None:
            item["MaxAgeSeconds"] = rule.max_age_seconds
        converted.append(item)
    return converted


def cors_from_s3(rules: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """S3's CORS rules in the comparable form of :func:`normal_cors`."""
    return [
        {
            "allowedMethods": sorted(rule.get("AllowedMethods", [])),
            "allowedOrigins": sorted(rule.get("AllowedOrigins", [])),
            "allowedHeaders": sorted(rule.get("AllowedHeaders", [])),
            "exposeHeaders": sorted(rule.get("ExposeHeaders", [])),
            "maxAgeSeconds": rule.get("MaxAgeSeconds"),
        }
        for rule in rules
    ]
