"""``dynaunique ui`` names a global table's mode on its models page
(dynaunique/_transport/regions.py)."""

from __future__ import annotations

from support.global_tables import EAST, make_global, member_model
from ui_server import running_ui


def test_the_models_page_names_a_global_table_s_mode(dynaunique_db: str) -> None:
    make_global(member_model("gt_cli", EAST, dynaunique_db, home=EAST), dynaunique_db)
    with running_ui("--endpoint", dynaunique_db, module="support.global_models") as server:
        page = server.fetch("/models")
    assert page.status == 200
    assert ('<p class="notice">A global table (eventual consistency) in eu-west-1, '
            "us-east-1.</p>") in page.body
