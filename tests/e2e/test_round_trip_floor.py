"""benchmarks/round_trip_floor.py measures one synchronous Redis round trip's CPU, client and
Redis side, and writes its figures (the floor under the CPU per request figures of cpu.md)."""

import json

import round_trip_floor


def test_the_floor_is_measured_and_written(tmp_path):
    result = round_trip_floor.main(
        ["--pings", "300", "--clients", "2", "--seconds", "0.5", "--out", str(tmp_path)]
    )
    written = json.loads((tmp_path / "round_trip_floor.json").read_text())
    assert written["figures"] == result["figures"]
    for case in ("one_client_tcp", "one_client_unix"):
        figures = written["figures"][case]
        assert figures["pings"] == 300
        assert figures["client_cpu_us"] > 0 and figures["redis_cpu_us"] > 0 and figures["wall_us"] > 0
        assert figures["client_cpu_us"] == round(
            figures["client_user_us"] + figures["client_system_us"], 2
        ) or (abs(figures["client_cpu_us"] - figures["client_user_us"] - figures["client_system_us"]) < 0.02)
    many = written["figures"]["many_clients_tcp"]
    assert many["clients"] == 2 and many["pings"] >= 200 and many["redis_cpu_us"] > 0
    busy = written["figures"]["busy_redis_tcp"]
    assert [row["loop_steps"] for row in busy] == list(round_trip_floor.BUSY_STEPS)
    for row in busy:
        assert row["pings"] == 60 and row["client_cpu_us"] > 0 and row["script_us"] > 0
    # The script's own time follows its loop (Redis's clock: a loaded machine only adds to it).
    assert busy[-1]["script_us"] > 5 * busy[0]["script_us"]
    assert busy[-1]["wall_us"] > busy[0]["wall_us"]
    text = (tmp_path / "round_trip_floor.md").read_text()
    assert "one client, TCP loopback" in text and "2 clients at once" in text
    assert "| 50,000 |" in text
