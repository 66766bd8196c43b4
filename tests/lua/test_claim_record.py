"""The claim record has one reader per language: lua/includes/claim_record.lua (parse_claim, in
claim, done, release and bury_unservable) and tracker_core.items.claim_records.parse. They must agree."""

import pytest

from tracker_core.items.claim_records import ClaimRecord, parse
from tracker_core.scripts import LUA_DIR

RECORDS = [
    "alice\t10.0.0.1\t1\t1700000000000",  # as the claim writes it
    "bob\t2001:db8::1\t12\t1700000000123",
    "carol\t10.0.0.3\t2",  # from before claim times were kept
    "dave\t\t1\t5",  # no address (a Unix socket's peer)
    "erin\t10.0.0.5\t1\t17000.5",  # not whole digits: not a record the scripts wrote
    "frank\t10.0.0.6\tx\t1",
    "gina\t10.0.0.7\t1\t2\t3",  # five fields
    "garbage",
    "",
]


@pytest.mark.parametrize("record", RECORDS)
def test_lua_and_python_read_a_claim_record_alike(r, record):
    source = (LUA_DIR / "includes" / "claim_record.lua").read_text() + (
        "\nlocal h, ip, t, c = parse_claim(ARGV[1])\n"
        "return {h or false, ip or false, t and tostring(t) or false, c and tostring(c) or false}"
    )
    holder, ip, times, claimed = r.eval(source, 0, record)  # Lua's false comes back as None
    python = parse(record)
    if holder is None:  # not a record the scripts wrote: Lua gives nothing, Python the downloader
        assert (python.times_claimed, python.claimed_ms) == (None, None)
        assert python.downloader == record.split("\t")[0]
        return
    assert python == ClaimRecord(holder, ip, int(times), int(claimed) if claimed else None)


def test_the_records_the_scripts_write_parse_whole():
    assert parse("alice\t10.0.0.1\t3\t1700000000000") == ClaimRecord("alice", "10.0.0.1", 3, 1700000000000)
    assert parse("carol\t10.0.0.3\t2") == ClaimRecord("carol", "10.0.0.3", 2, None)
    assert parse(None) == ClaimRecord("", "", None, None)
