"""The typed refusals live below the admin package: core paths raise them without loading it."""

import subprocess
import sys

import pytest

import tracker_core.admin.errors
from tracker_core import errors, keyspace
from tracker_core.warriors import hq


def test_the_faces_catch_the_same_types_the_core_raises():
    for name in ("AdminError", "BadInput", "NotFound", "Conflict"):
        assert getattr(tracker_core.admin.errors, name) is getattr(errors, name)


@pytest.mark.parametrize(
    "values, reason",
    [
        ({"nope": "1"}, "unknown HQ field"),
        ({"auto_project": "Bad Name/with?slash#and space"}, "auto_project must be a project name"),
    ],
)
def test_hq_set_fields_refuses_with_bad_input_and_stores_nothing(r, values, reason):
    r.hset(keyspace.HQ, "broadcast_message", "before")
    with pytest.raises(errors.BadInput, match=reason):
        hq.set_fields(r, dict(values, broadcast_message="after"))
    assert r.hgetall(keyspace.HQ) == {"broadcast_message": "before"}


def test_offload_and_intake_import_without_the_admin_package():
    code = (
        "import sys; from tracker_core.maintainer import maintenance; "
        "from tracker_core.items import intake, giveback; from tracker_core.warriors import hq; "
        "print(sorted(m for m in sys.modules if m.startswith('tracker_core.admin')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded == "[]\n"
