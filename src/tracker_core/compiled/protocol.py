"""Pick the compiled protocol helpers, or their pure-Python twin when TRACKER_PURE_PYTHON=1."""

from tracker_core.compiled import twins

# The longest item name, in characters: what /done takes back. Every way in keeps to it (backfeed
# counts bytes, never fewer than characters), so no item can be claimed that cannot be done.
MAX_ITEM_CHARS = 4096
# What one done may report, all domains together (why: see _protocol_py.py).
from tracker_core.compiled._protocol_py import MAX_DONE_BYTES  # noqa: E402,F401

_impl, COMPILED = twins.load("protocol")
flatten_bytes = _impl.flatten_bytes
split_items = _impl.split_items
valid_downloader = _impl.valid_downloader
version_key = _impl.version_key
version_older = _impl.version_older
