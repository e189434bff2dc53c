"""The ZAP handler of a keyed shard: it admits exactly the job's worker keys, and says whom it
refuses.

pyzmq's :class:`~zmq.auth.thread.ThreadAuthenticator` answers ZeroMQ's ZAP requests on a thread
of its own; its CURVE callback sees a key, not the address it came from, and a refusal was
logged only at DEBUG on ``zmq.auth``, which ``-v`` does not show: a shard refused strangers
without a word. :class:`JobAuthenticator` keeps the address of the request it checks, and
:class:`JobKeys` hands each refused key, with it, to the shard (``refused``).
"""

from __future__ import annotations

from collections.abc import Callable

import zmq
from zmq.auth.thread import ThreadAuthenticator

#: what a shard is told of each connection its ZAP handler refuses: (address, key as Z85)
Refused = Callable[[str, str], None]


class JobAuthenticator(ThreadAuthenticator):
    """pyzmq's ZAP thread, keeping the address of the connection whose key it checks (the
    ZAP request's fourth frame) for :class:`JobKeys`: one request at a time, on its thread."""

    address = ""

    async def handle_zap_message(self, msg: list[bytes]) -> None:  # noqa: D102 - pyzmq's
        self.address = msg[3].decode("utf-8", "replace") if len(msg) > 3 else ""
        await super().handle_zap_message(msg)


class JobKeys:
    """ZAP credentials provider: accepts exactly the given client public keys (Z85), and tells
    ``refused`` of every other, with the address it came from."""

    def __init__(self, keys: set[bytes], auth: JobAuthenticator, refused: Refused | None) -> None:
        self.keys, self._auth, self._refused = keys, auth, refused

    def callback(self, domain: str, key: bytes) -> bool:
        """Whether ``key`` is one of the job's; called by pyzmq on its ZAP thread."""
        if key in self.keys:
            return True
        if self._refused is not None:
            self._refused(self._auth.address, key.decode("ascii", "replace"))
        return False


def start_authenticator(
    context: zmq.Context, worker_public: set[bytes], refused: Refused | None = None
) -> ThreadAuthenticator:
    """Start a ZAP handler on ``context``, admitting only ``worker_public`` keys; ``refused``
    is called (on the handler's thread) with the address and key of each connection refused."""
    auth = JobAuthenticator(context)
    auth.start()
    keys = JobKeys(set(worker_public), auth, refused)
    auth.configure_curve_callback(domain="*", credentials_provider=keys)
    return auth
