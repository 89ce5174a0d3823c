"""``docs/security.md`` lists every security config of Kafka 4.4 with what seglog does with
it, and every security API served: its generated tables are the config table's and the
handler registry's."""

from __future__ import annotations

import pathlib
import re

from seglog.config_table import BROKER_CONFIGS
from seglog.configdef import NO
from seglog.security_docs import SECURITY_API_KEYS, is_security_config, security_tables_markdown
from seglog.server.registry import served_apis

PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "security.md"


def test_security_page_tables_are_generated():
    text = PAGE.read_text()
    found = re.search(r"<!-- security-tables -->\n(.*?)<!-- /security-tables -->", text,
                      flags=re.S)
    assert found, "docs/security.md has no security-tables block"
    assert found.group(1) == security_tables_markdown(), (
        "docs/security.md is stale: replace its security-tables block with "
        "`PYTHONPATH=src python -m seglog.security_docs`")


def test_every_security_config_and_api_is_listed():
    text = security_tables_markdown()
    for name, key in BROKER_CONFIGS.items():
        if name.startswith(("ssl.", "sasl.", "delegation.token.")) or name in (
                "authorizer.class.name", "super.users", "listeners"):
            assert is_security_config(key)
            assert f"| `{name}` |" in text, name
            assert ("**refused by name**" in text.split(f"| `{name}` |", 1)[1].split("\n", 1)[0]) \
                == (key.support == NO), name
    served = {key for key, *_ in served_apis()}
    assert set(SECURITY_API_KEYS) <= served, "every security API is served"
    for key in SECURITY_API_KEYS:
        assert re.search(rf"^\| {key} \| ", text, flags=re.M), key
