"""The embedded Celery queue: kombu's file-system transport with whole-message writes.

kombu creates a message file under its final name and then writes into it, so a worker polling the
folder can take the file while it is still empty and drop the message as unreadable (seen in a tight
loop: 40 of 3,000 messages lost). Here a message is written under a name the reader ignores and
renamed into place, so it appears whole or not at all."""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    # kombu's own classes name the message differently (message, payload); kombu passes it by position
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".part"  # the reader only takes names ending in "<queue>.msg"
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
