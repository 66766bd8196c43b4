"""`tracker items add --progress`: bytes of a file, a count and rate for stdin, items/s at the
end, all on stderr: stdout keeps only the answer (--json stays parseable)."""

import io
import json
import re

import pytest
from click.testing import CliRunner

from tracker_api.cli import main
from tracker_api.cli.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


NAMES = [f"https://example.com/page?id={i}&q=a%20b#frag {i}/" for i in range(300)]


@pytest.fixture
def add(redis_url, admin):
    from tracker_core.admin import project_verbs

    project_verbs.create(admin, "prog")
    runner = CliRunner()

    def invoke(*args, input=None):
        result = runner.invoke(main, ["--redis-url", redis_url, "items", "add", "prog", *args], input=input)
        assert result.exit_code == 0, result.output
        return result

    return invoke


def test_progress_of_a_file_counts_its_bytes(add, r, tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("".join(n + "\n" for n in NAMES))
    size = path.stat().st_size
    result = add(str(path), "--batch", "50", "--progress", "--json")
    assert json.loads(result.stdout) == {"added": 300, "duplicates": 0}
    lines = result.stderr.splitlines()
    first = re.fullmatch(r"adding to prog:todo: (\S+ \S+) of (\S+ \S+) \((\d+)%\)", lines[0])
    assert first, lines
    assert first.group(2) == f"{size / 1000:.1f} kB" and 0 < int(first.group(3)) <= 100
    assert re.fullmatch(r"took 300 items into prog:todo in \d+\.\d s: [\d,]+ items/s", lines[-1]), lines
    assert r.scard("{prog}:todo") == 300


def test_progress_of_stdin_counts_items_with_a_rate(add, r):
    result = add("-", "--batch", "100", "--progress", "--json", input="".join(n + "\n" for n in NAMES))
    assert json.loads(result.stdout) == {"added": 300, "duplicates": 0}
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"adding to prog:todo: 100 items \([\d,]+ items/s\)", lines[0]), lines
    assert re.fullmatch(r"took 300 items into prog:todo in \d+\.\d s: [\d,]+ items/s", lines[-1]), lines


def test_no_progress_unless_asked_when_stderr_is_no_terminal(add):
    result = add("-", "--json", input="a\nb\n")
    assert result.stderr == "" and json.loads(result.stdout) == {"added": 2, "duplicates": 0}


def test_on_a_terminal_each_update_rewrites_the_line():
    stream = Terminal()
    progress = Progress(stream, "p:todo", None)
    progress.update(5)
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\r\x1b[Kadding to p:todo: 5 items") and text.endswith(" items/s\n")
    assert text.count("\n") == 1  # one line, rewritten in place


def test_on_a_terminal_a_refusal_gets_a_line_of_its_own():
    stream = Terminal()
    with pytest.raises(ValueError), Progress(stream, "p:todo", None) as progress:
        progress.update(5)
        raise ValueError("line 6: bad item")
    assert stream.getvalue().endswith(" items/s)\n")
