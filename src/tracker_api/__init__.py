"""The HTTP side of the tracker: the warrior protocol, public pages, the admin faces; Falcon
served by bjoern.

- app: the Falcon app, composed of every part below (create_app); server: bjoern workers, their
  supervision and the renderer process (serve);
- web: what every face shares (errors, auth, config, logs); connections: the workers' sockets;
- public: pages and figures anyone may read; warrior_api: the warrior protocol;
- admin: the admin API and pages; cli: the ``tracker`` command.

Each package's docstring says what it may import; tests/core/test_layers.py holds the code to it.
"""
