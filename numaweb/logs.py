"""JSON-lines log format (NUMAWEB_LOG_FORMAT=json): one object a line, so a log shipper needs no parsing rules."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# attributes every LogRecord has; anything else on a record came from `extra=` and is written as a field
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """time (UTC, ISO 8601), level, logger, process, message, the record's `extra` fields, and the
    traceback as `exc` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)
