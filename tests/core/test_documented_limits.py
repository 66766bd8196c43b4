"""Documented limits tested at the bound and one past it: range points, link length, page sizes."""

import pytest

from tracker_core.admin import checks
from tracker_core.figures import stats_ranges
from tracker_core.project import project_links

DAY_S = 86_400


def test_all_range_steps_a_day_up_to_750_days_then_two():
    assert stats_ranges.step_for(stats_ranges.MAX_RANGE_POINTS) == DAY_S
    assert stats_ranges.step_for(stats_ranges.MAX_RANGE_POINTS + 1) == 2 * DAY_S


def test_thin_keeps_750_points_and_thins_751_keeping_the_newest():
    at = list(range(stats_ranges.MAX_RANGE_POINTS))
    assert stats_ranges.thin(at) == at
    past = list(range(stats_ranges.MAX_RANGE_POINTS + 1))
    kept = stats_ranges.thin(past)
    assert len(kept) <= stats_ranges.MAX_RANGE_POINTS
    assert kept[-1] == past[-1]


def test_link_of_500_characters_is_taken_501_refused():
    head = "https://a.example/"
    at = head + "x" * (project_links.MAX_URL_CHARS - len(head))
    assert len(at) == 500 and project_links.http_url(at) == at
    with pytest.raises(ValueError, match="at most 500"):
        project_links.http_url(at + "x")


def test_page_size_clamps_at_max_page():
    assert checks.page(checks.MAX_PAGE) == checks.MAX_PAGE
    assert checks.page(checks.MAX_PAGE + 1) == checks.MAX_PAGE
    assert checks.page(0) == 1


def test_some_items_takes_max_page_names_and_refuses_one_more():
    names = [f"i{n}" for n in range(checks.MAX_PAGE)]
    assert checks.some_items(names) == names
    with pytest.raises(checks.BadInput):
        checks.some_items(names + ["one-more"])


def test_item_name_of_max_chars_is_taken_one_more_refused():
    assert checks.item("x" * checks.MAX_ITEM_CHARS, 1)
    with pytest.raises(checks.BadInput):
        checks.item("x" * (checks.MAX_ITEM_CHARS + 1), 1)


def test_pattern_text_takes_max_chars_and_refuses_one_more():
    at = "x" * checks.MAX_PATTERN_CHARS
    assert checks.text(at, "pattern", checks.MAX_PATTERN_CHARS) == at
    with pytest.raises(checks.BadInput, match="at most"):
        checks.text(at + "x", "pattern", checks.MAX_PATTERN_CHARS)


def test_cursor_takes_max_cursor_and_refuses_one_more():
    assert checks.cursor(checks.MAX_CURSOR) == checks.MAX_CURSOR
    with pytest.raises(checks.BadInput):
        checks.cursor(checks.MAX_CURSOR + 1)


@pytest.mark.parametrize("span", [1499, 1500, 1501, 2249, 2250, 3001])
@pytest.mark.parametrize("first", [0, 1, 2])
def test_all_range_stays_within_750_points_however_its_first_day_falls(span, first):
    step_s = stats_ranges.step_for(span)
    rows = [((first + d) * DAY_S, {"items_done": 1}) for d in range(span)]
    buckets = stats_ranges.bucketed(rows, step_s)
    assert len(buckets) <= stats_ranges.MAX_RANGE_POINTS
    assert sum(c["items_done"] for _, c in buckets) == span
