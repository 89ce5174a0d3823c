"""docs/server.md cannot drift: its table of APIs is the registry's (what ApiVersions
advertises), and the limits it names exist (docs/configs.md has its own test,
tests/test_config_docs.py)."""

from __future__ import annotations

import pathlib
import re

from seglog.server.config import CONFIG_DEFS
from seglog.server.registry import api_table_markdown, served_apis

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _between(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {name}:start[^>]*-->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"docs/server.md has no {name} markers"
    return match.group(1)


def test_api_table_is_the_registrys():
    assert _between("api-table") == api_table_markdown(), (
        "docs/server.md's API table is stale: paste "
        "seglog.server.registry.api_table_markdown() between its api-table markers")


def test_api_table_matches_what_a_broker_advertises(broker):
    assert [(key, low, high) for key, _, low, high, _ in served_apis()] == broker.api_ranges


def test_limits_named_in_the_doc_are_configs():
    text = DOC.read_text(encoding="utf-8")
    limits = text.split("## Limits", 1)[1].split("##", 1)[0]
    names = re.findall(r"^\| `([a-z.]+)` \| (\d+) \|", limits, re.M)
    assert len(names) >= 6
    for name, default in names:
        assert CONFIG_DEFS[name].default == int(default), name
