"""The workers' sockets, below the app: what a bjoern worker does before a request is parsed.

- connguard: the policy (slow or idle clients, too many connections from one address);
- accept_pause: pausing bjoern's accepting while a worker is full;
- worker_sockets: the socket primitives (TCP_INFO, FIONREAD, reset, checked duplicate);
- bodycap: bodies capped before the app reads them.

May import: nothing of tracker_api outside this package.
"""
