"""What anyone may read: pages, figures and the renderer that serves them to anonymous crowds.

- front_page, stats_page, stats_json: the front page, a project's leaderboard and stats.json;
- metrics, node_metrics, request_metrics, health: /metrics (with the node's own figures and
  per-route request durations), /healthz;
- live: the live leaderboard feed (websockets);
- public_cache, public_renderer, rendered_files: anonymous pages rendered once a second into
  shared files by one renderer process and served by every worker from them.

May import: tracker_api.web.
"""
