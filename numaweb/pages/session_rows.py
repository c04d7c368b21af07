"""The rows of the sessions list as HTML, built in Python: per row, a template loop with a URL tag and
`timesince` cost more than everything else on the page, so a full page was several times an empty one.
Every value that is not an int goes through `escape`; the result is marked safe only after that."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from numaweb.links import id_link

#: the session columns a row shows, in the order `render_rows` unpacks them (a values_list: model
#: instances cost more to build than the row's HTML)
COLUMNS = ("id", "cluster__name", "profile", "dry_run", "room_check", "status", "pods_placed", "pods_total",
           "nodes_total", "created_at")
#: how a make-room plan's verifying dry run is told apart from the sessions people asked for
ROOM_CHECK = (' <span class="badge room-check" data-room-check title="the dry run that verified a make-room plan">'
              "make-room check (dry run)</span>")


def render_rows(sessions: Iterable[tuple]) -> SafeString:
    """One <tr> per session (tuples of COLUMNS): link, cluster, profile (a make-room plan's verifying dry run says
    so), status badge, pods placed, nodes, created (in the site's time zone)."""
    head, tail = (escape(part) for part in id_link("pages:session"))
    text: dict[str, str] = {}  # cluster names, profiles and statuses repeat from row to row: escaped once
    zone = timezone.get_current_timezone()
    out = []
    for pk, cluster, profile, dry_run, room_check, status, placed, total, nodes, created in sessions:
        cluster, profile, status = (text.get(v) or text.setdefault(v, escape(v)) for v in (cluster, profile, status))
        when = created.astimezone(zone).isoformat()
        dry = (ROOM_CHECK if room_check else " (dry run)") if dry_run else ""
        out.append(
            f'<tr data-session="{pk}" data-status="{status}"><td><a href="{head}{pk}{tail}">#{pk}</a></td>'
            f"<td>{cluster}</td><td>{profile}{dry}</td>"
            f'<td><span class="badge st-{status}">{status}</span></td><td>{placed}/{total}</td><td>{nodes}</td>'
            f'<td><time datetime="{when}">{when[:10]} {when[11:16]}</time></td></tr>')
    if not out:
        out.append('<tr><td colspan="7">No session yet.</td></tr>')
    return mark_safe("".join(out))
