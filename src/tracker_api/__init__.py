"""The HTTP side of the tracker: warrior protocol, stats, admin; Falcon served by bjoern."""
