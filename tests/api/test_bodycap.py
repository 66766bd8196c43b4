"""CappedBody: what bjoern buffers is capped per body and in all, and the budget is given back."""

import gc

import pytest

from tracker_api import bodycap
from tracker_api.bodycap import CappedBody


@pytest.fixture(autouse=True)
def small_caps(monkeypatch):
    monkeypatch.setattr(CappedBody, "limit_bytes", 100)
    monkeypatch.setattr(CappedBody, "budget_bytes", 150)
    monkeypatch.setattr(CappedBody, "buffered_total", 0)


def test_a_body_under_the_cap_is_kept_and_counted_until_released():
    body = CappedBody()
    assert body.write(b"x" * 60) == 60 and body.write(b"y" * 40) == 40
    assert body.refusal is None and body.getvalue() == b"x" * 60 + b"y" * 40
    assert CappedBody.buffered_total == 100
    body._release()
    assert CappedBody.buffered_total == 0 and body.kept == 0
    body._release()  # twice gives back nothing more
    assert CappedBody.buffered_total == 0


def test_a_body_past_the_cap_is_refused_and_keeps_nothing():
    body = CappedBody()
    body.write(b"x" * 60)
    assert body.write(b"y" * 41) == 41  # bjoern must never see write fail
    assert body.refusal == "too_large" and body.getvalue() == b""
    assert body.write(b"z") == 1 and body.getvalue() == b""
    assert CappedBody.buffered_total == 0


def test_bodies_past_the_budget_together_are_refused_busy():
    first, second = CappedBody(), CappedBody()
    first.write(b"x" * 100)
    second.write(b"y" * 50)
    assert second.refusal is None and CappedBody.buffered_total == 150
    third = CappedBody()
    third.write(b"z")
    assert third.refusal == "busy" and CappedBody.buffered_total == 150
    first._release()
    fourth = CappedBody()
    fourth.write(b"w" * 100)
    assert fourth.refusal is None and CappedBody.buffered_total == 150


def test_a_body_dropped_unreleased_gives_its_budget_back():
    body = CappedBody()
    body.write(b"x" * 80)
    del body
    gc.collect()
    assert CappedBody.buffered_total == 0


def test_a_released_large_body_frees_its_buffer_at_once(monkeypatch):
    monkeypatch.setattr(CappedBody, "limit_bytes", 1 << 20)
    monkeypatch.setattr(CappedBody, "budget_bytes", 2 << 20)
    large, small = CappedBody(), CappedBody()
    large.write(b"x" * bodycap._TRUNCATE_FROM_BYTES)
    small.write(b"y" * 10)
    large._release()
    small._release()
    assert large.getvalue() == b"" and CappedBody.buffered_total == 0
    assert small.getvalue() == b"y" * 10  # freed with the request, after its answer
