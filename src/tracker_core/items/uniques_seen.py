"""Which downloaders and IPs this process already counted in a project's daily uniques.

The claim script counts each client in two HyperLogLogs per day (uniq:downloaders:D,
uniq:ips:D). Adding a member already counted changes nothing, yet each PFADD is a Redis call
inside the script (about 2 us of the one Redis a project lives on). So the engine remembers what
its claims counted and tells the script, which then skips those PFADDs: the counts stay what
they were, at two calls less for a returning client.

A record is kept per project, created_ms (a project deleted and created again starts with empty
uniques: the script honours the flags only while the stored created_ms is the one they were
recorded under) and day (the keys' day, from the same now_ms). Each set holds at most
MAX_MEMBERS names; past that, new members are simply not remembered (their PFADD runs every
time), so memory stays bounded however many clients come.
"""

from __future__ import annotations

from tracker_core import scripts

MAX_MEMBERS = 50_000
DAY_MS = 86_400_000
# Only these replies come from a claim that ran (or rightly skipped) the PFADDs: 403 stops
# before them (blocked clients are not counted) and -1 means no project.
_COUNTED_CODES = frozenset(
    (scripts.claim.codes.OK, scripts.claim.codes.NOTHING, scripts.claim.codes.RATE_LIMITED)
)


class UniquesSeen:
    def __init__(self, max_members: int = MAX_MEMBERS):
        self.max_members = max_members
        # project -> (created_ms, day, downloaders, ips)
        self._seen: dict[str, tuple[str, int, set, set]] = {}

    def flags(
        self, project: str, created_ms: str, now_ms: int, downloader: str, ip: str
    ) -> tuple[bool, bool]:
        """(downloader counted, IP counted) for a claim at NOW_MS in PROJECT's life CREATED_MS."""
        entry = self._seen.get(project)
        if entry is None or entry[0] != created_ms or entry[1] != now_ms // DAY_MS:
            return False, False
        return downloader in entry[2], ip in entry[3]

    def record(self, project: str, created_ms: str, now_ms: int, downloader: str, ip: str, code: int) -> None:
        """Note that a claim answered CODE counted DOWNLOADER and IP (when CODE says it did)."""
        if code not in _COUNTED_CODES or not created_ms:
            return
        day = now_ms // DAY_MS
        entry = self._seen.get(project)
        if entry is None or entry[0] != created_ms or entry[1] != day:
            entry = self._seen[project] = (created_ms, day, set(), set())
        for members, member in ((entry[2], downloader), (entry[3], ip)):
            if len(members) < self.max_members:
                members.add(member)
