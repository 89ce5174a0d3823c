"""Building the seed directories once per test session (see ``conftest.py``).

The SIGKILL image is written by a worker process that kills itself after its last append,
so the files are exactly what a crashed writer leaves in the page cache.
"""

from __future__ import annotations

import os
import pickle

from . import corpus
from .workers import Worker


def make_seed_logs(root: str) -> dict:
    """``{label: (dir, model)}`` for labels ``clean``, ``copy`` (unclean image) and ``kill``."""
    out = {}
    for shutdown in ("clean", "copy"):
        path = os.path.join(root, shutdown)
        out[shutdown] = (path, corpus.build_log(path, shutdown=shutdown))
    path = os.path.join(root, "kill")
    with Worker() as worker:
        reply = worker.call("build_log", {"path": path, "shutdown": "kill"}, timeout_s=120)
    if reply.status != "crash" or reply.value != "SIGKILL":
        raise RuntimeError(f"the SIGKILL seed did not die as planned: {reply}")
    with open(path + ".model", "rb") as f:
        model = pickle.load(f)
    os.remove(path + ".model")
    model["shutdown"] = "kill"
    out["kill"] = (path, model)
    return out


def make_seed_stores(root: str) -> dict:
    """``{label: (dir, model)}`` for a store after a clean close and as an unclean copy."""
    out = {}
    for shutdown in ("clean", "copy"):
        path = os.path.join(root, shutdown)
        out[shutdown] = (path, corpus.build_store(path, shutdown=shutdown))
    return out
