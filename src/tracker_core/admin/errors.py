"""The typed refusals of the admin verbs, where the faces import them from; they live in
tracker_core.errors so that the core paths below the verbs (intake, hq) raise them too."""

from tracker_core.errors import AdminError, BadInput, Conflict, NotFound

__all__ = ["AdminError", "BadInput", "Conflict", "NotFound"]
