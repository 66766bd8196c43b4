"""Locust warriors that load-test the tracker (locustfile.py; runner.run_headless drives it)."""
