"""The admin's history pages for audited models show where each change came from and who made it."""

from simple_history.admin import SimpleHistoryAdmin


class AuditedAdmin(SimpleHistoryAdmin):
    history_list_display = ["history_source", "history_username"]
