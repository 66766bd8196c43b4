"""The warrior protocol (docs/protocol.md): what seesaw clients and grab scripts call.

- warrior_routes: request, done, done+request, release, upload, uploaded, item status;
- hot_path: the same routes answered without building Falcon's Request and Response;
- backfeed_route: POST /backfeed/legacy/PROJECT-SECRET;
- hq_routes: the warrior HQ (projects.json, register, update);
- protocol_shapes: what their declarations (web.api_spec) say the protocol reads and answers.

May import: tracker_api.web, tracker_api.public (the cached projects.json).
"""
