"""Fixtures several test files share beyond tests/conftest.py's: the app under falcon's test
client, and the `tracker` command run in-process. tests/conftest.py registers this module
(pytest_plugins); a file that wants another app or command line defines a fixture of the same
name, which wins over these (and may ask for these by that name)."""

import pytest
from click.testing import CliRunner
from falcon import testing

from tracker_api.app import create_app
from tracker_api.cli import main


@pytest.fixture
def web(engine):
    """falcon's test client over the app in its default configuration (one protocol
    implementation: the `client` fixture runs a test over both)."""
    return testing.TestClient(create_app(engine))


@pytest.fixture
def cli(redis_url):
    """`tracker --redis-url URL ARGS...` run in-process: cli(*args, input=None, env=None) -> Result."""
    runner = CliRunner()

    def invoke(*args, input=None, env=None):
        return runner.invoke(main, ["--redis-url", redis_url, *args], input=input, env=env)

    return invoke
