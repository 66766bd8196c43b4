"""The maintained benchmarks that fit in one module each, registered with the harness (the
whole-server ones live in server_bench/ and cpu_bench/, the pytest-benchmark ones in micro/)."""
