"""The admin faces over tracker_core.admin's verbs: the JSON API and the server-rendered pages.

- api_routes: the API's route table and responder; api_request: what a handler reads from its
  request; api_handlers: the handlers, one per verb, each declared (web.api_spec) with the
  shapes of api_shapes;
- pages: the admin pages (forms, sessions, CSRF), one per area.

May import: tracker_api.web.
"""
