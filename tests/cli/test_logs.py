"""logs.setup: one format (time, level, component), one level, and no Redis password or backfeed
secret through any component logger, whatever handler is listening."""

import io
import logging
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker_api.web import logs

PASSWORD = "s3cretpassword42"
URL = f"redis://tracker:{PASSWORD}@10.0.0.1:6379/0"
SECRET = "0123456789abcdef0123"
COMPONENTS = ("tracker.server", "tracker.run", "tracker.maintain", "tracker.live", "tracker.access",
              "tracker.redis", "tracker.processes")  # fmt: skip


@pytest.fixture
def logged(monkeypatch):
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    monkeypatch.delenv("TRACKER_LOG_LEVEL", raising=False)
    buffer = io.StringIO()
    yield buffer
    logs.reset()


@pytest.mark.parametrize("component", COMPONENTS)
def test_no_component_logs_a_password_or_secret_through_any_handler(logged, component):
    logs.setup("debug", access_log=True, stream=logged)
    # A handler added later, with a formatter of its own, is protected as well as logs.py's.
    other = io.StringIO()
    extra = logging.StreamHandler(other)
    extra.setFormatter(logging.Formatter("%(message)s %(msg)s %(args)s"))
    logger = logging.getLogger(component)
    logger.addHandler(extra)
    try:
        logger.info("Redis %s down", URL)
        logger.warning(f"POST /backfeed/legacy/proj-{SECRET} refused, Redis {URL}")
        try:
            raise ConnectionError(f"Error connecting to {URL}")
        except ConnectionError:
            logger.exception("lost Redis")
        logger.error("stack in %s", URL, stack_info=True)
    finally:
        logger.removeHandler(extra)
    for text in (logged.getvalue(), other.getvalue()):
        assert PASSWORD not in text and SECRET not in text
        assert "redis://tracker:***@10.0.0.1" in text and "Traceback" in text
    assert f"{component}: Redis redis://tracker:***@10.0.0.1:6379/0 down" in logged.getvalue()


def test_lines_carry_time_level_and_component(logged):
    logs.setup(stream=logged)
    logging.getLogger("tracker.maintain").warning("pass failed")
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d WARNING tracker\.maintain: pass failed\n", logged.getvalue()
    )


def test_under_systemd_the_journal_adds_the_time(logged, monkeypatch, tmp_path):
    with open(tmp_path / "journal", "w+") as journal, open(tmp_path / "file", "w+") as elsewhere:
        info = os.fstat(journal.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{info.st_dev}:{info.st_ino}")
        lines = []
        for stream in (journal, elsewhere):  # a child's stderr sent to a file keeps the time
            logs.setup(stream=stream)
            logging.getLogger("tracker.server").info("serving")
            stream.seek(0)
            lines.append(stream.read())
    assert lines[0] == "INFO tracker.server: serving\n"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d INFO tracker\.server: serving\n", lines[1])


def test_the_level_comes_from_the_option_or_the_environment(logged, monkeypatch):
    logs.setup("warning", stream=logged)
    logging.getLogger("tracker.live").info("quiet")
    monkeypatch.setenv("TRACKER_LOG_LEVEL", "debug")
    logs.setup(stream=logged)
    logging.getLogger("tracker.live").debug("loud")
    assert "quiet" not in logged.getvalue() and "DEBUG tracker.live: loud" in logged.getvalue()
    assert not logging.getLogger("tracker.access").isEnabledFor(logging.INFO)  # off unless asked


def test_setup_again_replaces_the_handler(logged):
    logs.setup(stream=logged)
    logs.setup(stream=logged)
    logging.getLogger("tracker.run").info("once")
    assert logged.getvalue().count("once") == 1


def test_a_bad_format_is_logged_not_raised(logged):
    logs.setup(stream=logged)
    logging.getLogger("tracker.server").warning("two %s %s", URL)
    assert "two %s %s" in logged.getvalue() and PASSWORD not in logged.getvalue()


# Pieces of every secret's marker, in odd cases and with look-alikes ("ſ" is an "s" to (?i)).
PIECES = ["@", "://", "redis://u:", "/backfeed/legacy/", "-", "%2d", "%61", "Bearer ", "BEARER\t",
          "paſſword=", "PassWd:", "token=", "SECRET: ", "requirepass ", "x", "/", " ", "\u212a",
          "trk_", "0123456789ab_", "trk_0123456789ab_", "trk_00000000000f_S3c", "_",
          "backfeed", "BAC\u212aFEED", "%62ackfeed", "%2F", "legacy", "queues/"]  # fmt: skip


@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=12).map("".join))
def test_the_shortcut_never_skips_a_secret(text):
    from tracker_api.web import redact

    assert redact.redact(text) == redact._redact_all(text)


def test_a_bare_admin_token_is_redacted_and_keeps_its_id(logged, r):
    from tracker_api.web import redact
    from tracker_core.access import tokens

    token, record = tokens.create(r, "*")
    secret = token[len(f"trk_{record.token_id}_") :]  # the secret may itself hold "_"
    assert tokens.TOKEN_RE.match(token) and len(secret) == 43
    logs.setup(stream=logged)
    logging.getLogger("tracker.run").info("made %s for the demo", token)
    logging.getLogger("tracker.access").info(f"pasted into a form: x{token},{token[:30]}")
    text = logged.getvalue()
    assert secret not in text and secret[:13] not in text  # token[:30] holds 13 of it
    assert f"tracker.run: made trk_{record.token_id}_*** for the demo" in text
    assert redact.redact(token) == f"trk_{record.token_id}_***"


def test_what_only_looks_like_a_token_is_kept():
    from tracker_api.web import redact

    for text in ("trk_demo_items", "trk_0123456789a_short", "TRK_0123456789AB_x", "the trk_ prefix"):
        assert redact.redact(text) == text
