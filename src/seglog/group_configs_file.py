"""Where a lone broker keeps its group configs: ``seglog-group-configs.json`` in its data
directory (Kafka keeps them in its KRaft metadata, which seglog has not; a ZooKeeper cluster
keeps them in ``/config/groups/<group>``).

One JSON object, ``{"version": 1, "groups": {group_id: {config name: value string}}}``,
replaced atomically (write-temp, fsync, rename, fsync dir). ``seglog serve`` (its
GROUP config resources) and the embedded share groups of a
:class:`~seglog.store.Store` read and write the same file, so a group's configs set through
either apply to both.
"""

from __future__ import annotations

import json
import os
from typing import Mapping

from .errors import CorruptCheckpointError
from .storage import checkpoints

__all__ = ["GROUP_CONFIGS_FILE", "read_group_configs", "write_group_configs"]

#: The file's name in the data directory.
GROUP_CONFIGS_FILE = "seglog-group-configs.json"
_FILE_VERSION = 1


def read_group_configs(dir_path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Every group's configs in ``dir_path`` (``{}`` when there is no file). Raises
    :class:`~seglog.errors.CorruptCheckpointError` for a file that is not this format."""
    path = os.path.join(os.fspath(dir_path), GROUP_CONFIGS_FILE)
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, RecursionError) as e:
        raise CorruptCheckpointError(f"{path} is not valid JSON: {e}", path=path) from None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != _FILE_VERSION \
            or not isinstance(groups, dict):
        raise CorruptCheckpointError(f"{path}: unknown format", path=path)
    out: dict[str, dict[str, str]] = {}
    for group_id, values in groups.items():
        if not isinstance(values, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
            raise CorruptCheckpointError(f"{path}: configs of group {group_id!r} must map "
                                         "names to strings", path=path)
        if values:
            out[str(group_id)] = dict(values)
    return out


def write_group_configs(dir_path: str | os.PathLike[str],
                        configs: Mapping[str, Mapping[str, str]]) -> None:
    """Replace the file in ``dir_path`` with ``configs`` (every group's), atomically."""
    text = json.dumps({"version": _FILE_VERSION,
                       "groups": {g: dict(v) for g, v in configs.items() if v}},
                      indent=1, sort_keys=True)
    checkpoints.atomic_write_bytes(os.path.join(os.fspath(dir_path), GROUP_CONFIGS_FILE),
                                   (text + "\n").encode("utf-8"))
