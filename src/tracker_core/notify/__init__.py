"""Webhooks: what the maintainer tells receivers (docs/operations.md, "Webhooks").

- hooks: the hooks an admin adds (URL, project, events, the secret that signs), their bounds and
  their delivery figures;
- events: the events, what fires each and when it re-arms, as pure functions of what was seen
  before and what is seen now;
- detect: the detector, which reads every project (and this node's clock, and Redis's
  primaries) and writes what it saw together with the deliveries of the events it found, in
  one script (notify_emit), only if no other maintainer wrote it first;
- outbox: the deliveries in Redis, claimed one deliverer at a time, their back-off;
- signing: the body of a POST, its headers and its HMAC-SHA256 signature;
- delivery: the deliverer (urllib, no redirects, a short timeout) and Notifier, the two threads
  `tracker maintain` runs beside its passes (never on a warrior's request path).

May import: tracker_core.keyspace, tracker_core.infra, tracker_core.scripts,
tracker_core.project, tracker_core.offload (the segment registry's vocabulary),
tracker_core.figures (the census).
"""
