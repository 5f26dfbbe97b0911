"""The built-in files provider: ``File`` and ``Directory`` resources of
``files.reconcile.dev/v1`` kept on the local filesystem, confined to root folders.

Registered as the ``files`` entry point of the ``reconcile.providers`` group; it imports
only reconcile's public API, as a third-party provider would.
"""

from reconcile_providers.files.kinds import API_VERSION, DIRECTORY, FILE, DirectorySpec, FileSpec
from reconcile_providers.files.provider import FilesProvider

__all__ = ["API_VERSION", "DIRECTORY", "FILE", "DirectorySpec", "FileSpec", "FilesProvider", "provider"]

provider = FilesProvider()
"""The provider object the entry point names."""
