"""The public item status answer (tracker_core.items.item_status) as the tests expect it."""

# A name found nowhere: every field empty (the old tracker's two keys among them).
NOWHERE = {
    "status": None,
    "downloader": None,
    "queue": None,
    "limit": None,
    "claims": None,
    "reason": None,
    "since": None,
    "segment": None,
    "maybe": [],
}


def place(**fields) -> dict:
    """The answer with FIELDS set and the others empty."""
    return {**NOWHERE, **fields}
