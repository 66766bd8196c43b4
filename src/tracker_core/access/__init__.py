"""Who may do what, and who did: admin tokens, backfeed secrets and the audit log.

May import: tracker_core.keyspace.
"""
