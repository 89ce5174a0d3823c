"""Regenerate ``src/seglog/commands/coordinator_messages.py`` from Kafka's message JSON files
(the ``coordinator-key`` / ``coordinator-value`` messages of the group and share coordinators;
the transaction coordinator's are printed by ``seglog.commands.dump`` itself).

Run: ``python tools/gen_coordinator_messages.py KAFKA_MESSAGES_DIR >
src/seglog/commands/coordinator_messages.py`` where the directory holds Kafka's
``*.json`` messages (``group-coordinator/src/main/resources/common/message`` and
``share-coordinator/...`` of a Kafka checkout, merged).
"""
import glob
import json
import os
import pprint
import sys

src = sys.argv[1]
out = {}
def strip_comments(text):
    return "\n".join(l for l in text.splitlines() if not l.strip().startswith("//"))
def prune(fields):
    res = []
    for f in fields:
        f = dict(f)
        # Kafka's FieldSpec: a field without "versions" has its tagged versions
        f.setdefault("versions", f.get("taggedVersions"))
        g = {k: f[k] for k in ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default") if k in f}
        if "fields" in f:
            g["fields"] = prune(f["fields"])
        res.append(g)
    return res
for path in sorted(glob.glob(os.path.join(src, "*.json"))):
    msg = json.loads(strip_comments(open(path).read()))
    if msg.get("type") not in ("coordinator-key", "coordinator-value"):
        continue
    if msg["name"].startswith("TransactionLog"):
        continue
    entry = {"apiKey": msg["apiKey"], "type": msg["type"], "validVersions": msg["validVersions"],
             "flexibleVersions": msg["flexibleVersions"], "fields": prune(msg["fields"])}
    if msg.get("commonStructs"):
        entry["commonStructs"] = [{"name": s["name"], "fields": prune(s["fields"])} for s in msg["commonStructs"]]
    out[msg["name"]] = entry
body = pprint.pformat(out, width=100, sort_dicts=False)
print('''"""Kafka 4.4's coordinator record schemas (``group-coordinator`` and ``share-coordinator``
``src/main/resources/common/message/*.json``, the ``coordinator-key`` / ``coordinator-value``
messages), reduced to what reading and printing a record needs: each field's name, type,
versions, nullable and tagged versions, tag and default (the ``about`` texts dropped).

Data only, read by :mod:`seglog.commands.coordinator_json`; regenerate it with
``tools/gen_coordinator_messages.py`` (never by hand) when Kafka's messages change.
"""

from __future__ import annotations

from typing import Any

#: Message name -> its schema (Kafka's JSON form, pruned).
MESSAGES: dict[str, dict[str, Any]] = ''' + body)
