"""Pick the compiled protocol helpers, or their pure-Python twin when TRACKER_PURE_PYTHON=1."""

import os

# The longest item name, in characters: what /done takes back. Every way in keeps to it (backfeed
# counts bytes, never fewer than characters), so no item can be claimed that cannot be done.
MAX_ITEM_CHARS = 4096
# What one done may report, all domains together (why: see _protocol_py.py).
from tracker_core._protocol_py import MAX_DONE_BYTES  # noqa: E402,F401

if os.environ.get("TRACKER_PURE_PYTHON") == "1":
    from tracker_core._protocol_py import (  # noqa: F401
        flatten_bytes,
        split_items,
        valid_downloader,
        version_key,
        version_older,
    )

    COMPILED = False
else:
    try:
        from tracker_core._protocol_c import (  # noqa: F401
            flatten_bytes,
            split_items,
            valid_downloader,
            version_key,
            version_older,
        )

        COMPILED = True
    except ImportError:
        from tracker_core._protocol_py import (  # noqa: F401
            flatten_bytes,
            split_items,
            valid_downloader,
            version_key,
            version_older,
        )

        COMPILED = False
