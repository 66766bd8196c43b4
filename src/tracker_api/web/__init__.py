"""What every face of the web app shares: nothing here knows a route.

- errors: refusals as HTTP answers (one line, the right status), and the handlers that map
  tracker_core's errors and Redis failures to them;
- auth: admin tokens read from a request; client_ip: the client's address behind proxies;
- web_headers, public_url: the headers every answer carries, the URL the tracker is reached at;
- config: the app's configuration (AppConfig);
- logs, redact, access_log: logging set up once, secrets kept out of it, the access log;
- api_spec, openapi: what a handler declares it reads and answers, and the OpenAPI document
  built from the app's routes and those declarations (GET /api/openapi.json).

May import: nothing of tracker_api outside this package.
"""
