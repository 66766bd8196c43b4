"""A project's rules: its settings, pattern and item-type limits, shards, links and HTML.

- settings_schema: the settings' names, types, defaults, validation and the cached entry;
- pattern_limits: pattern and item-type limits (validate, store, compile to a Classifier);
- shard_layout: where a project's items live (its shards' hash tags, the shard of a name);
- project_links, safe_html: what a project's page may link to and show.

May import: tracker_core.keyspace, tracker_core.compiled, tracker_core.scripts.
"""
