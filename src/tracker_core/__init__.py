"""The tracker engine: queues, claims and limits kept in Redis, changed only by Lua scripts."""
