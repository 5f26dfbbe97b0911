"""The live web view at ``/ui``: a page of plain HTML, CSS and JavaScript modules shipped in
the package (``reconcile/http/static/ui``; nothing fetched from the internet, no build
step), reading through the API itself with the user's own credentials.

:func:`ui_routes` serves the page, its assets and two small helpers the page asks
(``/ui/api/kinds``: each kind's resource and printer columns; ``/ui/api/access``: who the
user is and what they may do to an object); :class:`CsrfGuard` refuses a browser's
state-changing request from another origin, or one without the header only a script of
the page's own origin can send.
"""

from __future__ import annotations

from reconcile.http.ui.csrf import UI_HEADER, CsrfGuard
from reconcile.http.ui.routes import ui_routes

__all__ = ["UI_HEADER", "CsrfGuard", "ui_routes"]
