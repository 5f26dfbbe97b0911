"""The built-in s3 provider: ``Bucket`` and ``Object`` resources of ``s3.reconcile.dev/v1`` on any
S3-compatible endpoint (AWS, MinIO, Ceph, R2, moto), through aiobotocore.

Registered as the ``s3`` entry point of the ``reconcile.providers`` group; it imports only
reconcile's public API, as a third-party provider would. aiobotocore is imported when the
provider first connects, not when it is discovered.
"""

from reconcile_providers.s3.kinds import API_VERSION, BUCKET, BucketSpec
from reconcile_providers.s3.objects import OBJECT, ObjectSpec
from reconcile_providers.s3.provider import S3Provider

__all__ = ["API_VERSION", "BUCKET", "OBJECT", "BucketSpec", "ObjectSpec", "S3Provider", "provider"]

provider = S3Provider()
"""The provider object the entry point names."""
