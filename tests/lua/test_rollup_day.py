"""rollup_day-25.lua: a day's hour hashes are summed into the project's days hash, once."""

from tracker_core import scripts

DAY = 20_400


def test_rollup_sums_a_day_once_keeping_the_last_backlog(conn, project, r):
    first, last = DAY * 24, DAY * 24 + 23
    r.hset(project.hour(first), mapping={"minutes": 3, "items_done": 3, "bytes_done": 30, "backlog": 10})
    r.hset(
        project.hour(first + 5),
        mapping={
            "items_done": 4,
            "bytes_done": 2**40,
            "requests_served": 7,
            "requests_empty": 1,
            "backlog": 8,
        },
    )
    # requests is summed from the claim outcomes; a stored total (hours from before) is not read.
    r.hset(project.hour(first + 6), mapping={"requests": 1000, "requests_blocked": 1})
    r.hset(project.hour(last), "minutes", 0)  # rolled up, idle: the day is complete
    r.hset(project.hour(last + 1), "items_done", 1000)  # the next day: not summed
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.WRITTEN
    assert r.hgetall(project.days) == {str(DAY): f"7 {2**40 + 30} 9 7 8"}
    r.hset(project.hour(first + 1), "items_done", 100)
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.ALREADY
    assert r.hget(project.days, str(DAY)) == f"7 {2**40 + 30} 9 7 8"
    assert r.ttl(project.days) == -1  # kept for the project's life


def test_a_day_whose_last_hour_is_not_rolled_up_waits(conn, project, r):
    r.hset(project.hour(DAY * 24), "items_done", 5)
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.HOURS_PENDING
    assert not r.exists(project.days)
    r.hset(project.hour(DAY * 24 + 23), "minutes", 0)
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.WRITTEN
    assert r.hget(project.days, str(DAY)) == "5 0 0 0 -"  # no backlog sample that day


def test_a_days_requests_are_the_sum_of_every_claim_outcome(conn, project, r):
    from tracker_core.scripts.derived_counters import REQUEST_OUTCOMES

    first = DAY * 24
    for n, field in enumerate(REQUEST_OUTCOMES):  # 1, 2, 4, ... of each outcome, two hours
        r.hset(project.hour(first + n % 2), field, 2**n)
    r.hset(project.hour(first + 23), "minutes", 0)
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.WRITTEN
    total = 2 ** len(REQUEST_OUTCOMES) - 1  # each outcome's bit set once: none missed or doubled
    # Served: requests_served (1) and requests_served_one (2), the first two outcomes.
    assert r.hget(project.days, str(DAY)) == f"0 0 {total} 3 -"


def test_a_days_items_include_the_one_item_dones(conn, project, r):
    # A done of one item with an RTT counts done_one_le_B (derived_counters) and no items_done.
    first = DAY * 24
    r.hset(project.hour(first), mapping={"items_done": 2, "done_one_le_5": 3, "done_one_le_inf": 4})
    r.hset(project.hour(first + 7), mapping={"done_one_le_43200": 5, "rtt_le_5": 99})  # buckets only
    r.hset(project.hour(first + 23), "minutes", 0)
    assert scripts.rollup_day(conn, project, day=DAY) == scripts.rollup_day.codes.WRITTEN
    assert r.hget(project.days, str(DAY)) == "14 0 0 0 -"
