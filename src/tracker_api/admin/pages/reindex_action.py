"""The blocks page's reindex form (/admin/-/blocks-reindex): every project's block index rebuilt
from its block lists by tracker_core.admin.limit_verbs.reindex_blocks, as `tracker block
--reindex` does (after an upgrade or a repair); a global admin's, audited by the verb."""

from __future__ import annotations

from tracker_core.admin import limit_verbs


class ReindexAction:
    """GlobalPages' reindex action."""

    def _do_blocks_reindex(self, ctx, form):
        done = limit_verbs.reindex_blocks(ctx)["projects"]
        return f"reindexed the blocks of {done} project{'' if done == 1 else 's'}"
