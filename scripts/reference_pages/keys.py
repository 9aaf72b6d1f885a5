"""``annotations.md``: every annotation and label loadsched reads or writes, from
:data:`shared.annotation_keys.KEYS`."""

from __future__ import annotations

from reference_pages.markdown import cell, code, page, table
from shared.annotation_keys import KEYS, KeyUse


def files() -> dict[str, str]:
    metrics = [use for use in KEYS if use.crane]
    own = sorted((use for use in KEYS if not use.crane), key=lambda use: (use.kind, use.key))
    blocks = [
        "Every annotation and label loadsched reads or writes on Kubernetes objects, from "
        "the list in `shared/annotation_keys.py`; a unit test fails when the code spells a "
        "`loadsched.io/` key that the list does not hold.",
        "## Shared with crane-scheduler",
        "The annotator writes one Node annotation per metric of the policy's `syncPolicy`, "
        "under the metric's own name, and the hot value; crane-scheduler writes and reads the "
        "same keys in the same format, so either side can be swapped. The keys below are "
        "those of crane's default policy; a policy of your own adds its metric names. The "
        "value format and its freshness are in [Configure](../configure.md).",
        keys_table(metrics),
        "## loadsched's own",
        keys_table(own),
        "The test bed's pods also read `sandbox.loadsched.io/*` labels and annotations "
        "(their simulated lifecycle: [Development](../development.md)); nothing in a "
        "cluster does.",
    ]
    return {"annotations.md": page("Annotations and labels", *blocks)}


def keys_table(uses: list[KeyUse]) -> str:
    rows = [
        [code(u.key), u.kind, cell(u.on), cell(u.written_by), cell(u.read_by), cell(u.meaning)]
        for u in uses
    ]
    return table(["key", "kind", "on", "written by", "read by", "meaning"], rows)
