"""How ``seglog serve`` writes its log lines: ``--log-format text`` (the default, for people)
or ``--log-format json`` (one JSON object per line, for log shippers).

A JSON line has ``time`` (ISO-8601 in UTC, milliseconds, ``Z``), ``level``, ``logger`` and
``message`` (the formatted text), plus ``exception`` (the traceback's text) when the line
carries one and ``stack`` when it carries a stack. Nothing else: a shipper's parser needs no
schema beyond these names. The text format is ``TIME LEVEL LOGGER: MESSAGE``, as before.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

#: The text format's layout (``logging`` %-style).
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The values of ``--log-format``.
LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (ISO-8601 UTC), level, logger, message, and the
    exception's and stack's text when present."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (newlines inside values are escaped)."""
        stamp = datetime.datetime.fromtimestamp(record.created, tz=datetime.timezone.utc)
        line: dict[str, str] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (``"text"`` or ``"json"``); ValueError otherwise."""
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    if log_format == "json":
        return JsonFormatter()
    raise ValueError(f"unknown log format {log_format!r} (expected one of "
                     f"{', '.join(LOG_FORMATS)})")


def configure(level: int | str, log_format: str = "text",
              stream: TextIO | None = None) -> logging.Handler:
    """Send the root logger's records at ``level`` and above to ``stream`` (default stderr)
    in ``log_format``; returns the handler installed (replacing any the root had)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
