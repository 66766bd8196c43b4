"""The warrior HQ: the projects.json document and the registry of warriors with heartbeats.

May import: tracker_core.keyspace, tracker_core.errors, tracker_core.infra,
tracker_core.compiled, tracker_core.scripts, tracker_core.project.
"""
