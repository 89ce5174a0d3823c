"""UpdateFeatures' rules (KIP-584): which finalized feature levels a request may set, as Kafka
4.4's controller decides (``FeatureControlManager.updateFeatures``), and the two encodings
finalized levels are kept in (a lone broker's file, ZooKeeper's ``/feature`` znode).

The rules, per update in request order, the first refusal failing the whole request with
INVALID_UPDATE_VERSION and Kafka's message ("Invalid update version <v> for feature <f>.
<reason>"):

- an unknown upgrade type is refused ("The controller does not support the given upgrade
  type.");
- a level below 0 is refused ("A feature version cannot be less than 0.");
- a level outside the range this broker supports is refused ("Local controller <id> does
  not support this feature." when the feature's max is 0, an unknown feature included; else
  "Local controller <id> only supports versions <min>-<max>");
- a lower level than the finalized one needs a downgrade type, a higher one the upgrade type;
- a feature the table does not name is "Feature <f> not found." (level 0 gets that far).

Level 0 removes a feature from the finalized set (Kafka omits a feature at level 0). Every
function takes the feature table as an argument (``seglog.features.FEATURES`` in the
broker), so the rules are checked on any table.

A leaf module: the table's :class:`~seglog.features.Feature` and the standard library.
"""

from __future__ import annotations

import json
from typing import Mapping, NamedTuple

from . import error_codes as codes
from .features import Feature

__all__ = ["SAFE_DOWNGRADE", "UNKNOWN", "UNSAFE_DOWNGRADE", "UPGRADE", "FeatureUpdate",
           "Outcome", "decode_feature_file", "decode_feature_znode", "encode_feature_file",
           "encode_feature_znode", "plan_updates", "upgrade_type_of_v0"]

#: Kafka's ``FeatureUpdate.UpgradeType`` codes (UpdateFeatures v1+ ``UpgradeType``).
UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3
#: ``/feature``'s ``version`` (Kafka 2.8's ``FeatureZNode.V1``) and its ``status`` values.
ZNODE_VERSION = 1
ZNODE_DISABLED, ZNODE_ENABLED = 0, 1
#: The lone broker's file format version.
FILE_VERSION = 1


class FeatureUpdate(NamedTuple):
    """One entry of an UpdateFeatures request: the feature ``name``, the ``level`` to
    finalize (``MaxVersionLevel``) and the ``upgrade_type``."""

    name: str
    level: int
    upgrade_type: int


class Outcome(NamedTuple):
    """What a request comes to: ``error_code`` and ``message`` (None when it succeeds), and
    ``levels``, the finalized levels after it (the current ones when it fails)."""

    error_code: int
    message: str | None
    levels: dict[str, int]


def upgrade_type_of_v0(allow_downgrade: bool) -> int:
    """v0's ``AllowDowngrade`` as v1's upgrade type (Kafka's ``UpdateFeaturesRequest``: a
    downgrade allowed is a safe downgrade)."""
    return SAFE_DOWNGRADE if allow_downgrade else UPGRADE


def _refusal(update: FeatureUpdate, reason: str) -> str:
    return f"Invalid update version {update.level} for feature {update.name}. {reason}"


def _support_refusal(table: Mapping[str, Feature], name: str, level: int,
                     controller_id: int) -> str | None:
    feature = table.get(name)
    low, high = (0, 0) if feature is None else (feature.min_level, feature.max_level)
    if low <= level <= high:
        return None
    what = f"Local controller {controller_id}"
    if high == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {low}-{high}"


def plan_updates(updates: list[FeatureUpdate], finalized: Mapping[str, int],
                 table: Mapping[str, Feature], controller_id: int) -> Outcome:
    """The outcome of ``updates`` over the ``finalized`` levels with the features of
    ``table`` (see the module docstring); ``controller_id`` is the node named in refusals
    (the broker deciding)."""
    levels = dict(finalized)
    for update in updates:
        if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(
                update, "The controller does not support the given upgrade type."),
                dict(finalized))
        current = finalized.get(update.name, 0)
        if update.level < 0:
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(
                update, "A feature version cannot be less than 0."), dict(finalized))
        reason = _support_refusal(table, update.name, update.level, controller_id)
        if reason is not None:
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(update, reason),
                           dict(finalized))
        if update.level < current and update.upgrade_type == UPGRADE:
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(
                update, "Can't downgrade the version of this feature without setting the "
                "upgrade type to either safe or unsafe downgrade."), dict(finalized))
        if update.level > current and update.upgrade_type != UPGRADE:
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(
                update, "Can't downgrade to a newer version."), dict(finalized))
        if update.name not in table:
            # Kafka's Features.featureFromName, reached once the level passed the checks
            # above (only level 0 of a feature no broker supports gets here).
            return Outcome(codes.INVALID_UPDATE_VERSION, _refusal(
                update, f"Feature {update.name} not found."), dict(finalized))
        if update.level == 0:
            levels.pop(update.name, None)
        else:
            levels[update.name] = update.level
    return Outcome(codes.NONE, None, levels)


# --- encodings ------------------------------------------------------------------------------

def encode_feature_znode(levels: Mapping[str, int]) -> bytes:
    """``/feature``'s JSON as Kafka 2.8's ``FeatureZNode.encode`` writes it (status enabled;
    a finalized level ``L`` is the range ``L..L``, as ApiVersions reports it)."""
    return json.dumps({
        "version": ZNODE_VERSION, "status": ZNODE_ENABLED,
        "features": {name: {"min_version_level": level, "max_version_level": level}
                     for name, level in sorted(levels.items()) if level >= 1},
    }, separators=(",", ":")).encode()


def _levels_of(features: object, where: str) -> dict[str, int]:
    if not isinstance(features, dict):
        raise ValueError(f"{where}: features must be an object")
    levels: dict[str, int] = {}
    for name, entry in features.items():
        if isinstance(entry, dict):
            level = entry.get("max_version_level")
        else:
            level = entry
        if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 32767:
            raise ValueError(f"{where}: feature {name!r} has no valid level")
        if level >= 1:
            levels[str(name)] = level
    return levels


def decode_feature_znode(data: bytes) -> dict[str, int]:
    """The finalized levels in ``/feature``'s JSON (Kafka 2.8's ``FeatureZNode.decode``; a
    disabled node finalizes nothing). ValueError for data Kafka would refuse too."""
    try:
        node = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"/feature is not JSON: {exc}") from None
    if not isinstance(node, dict):
        raise ValueError("/feature is not a JSON object")
    version = node.get("version")
    if not isinstance(version, int) or version < ZNODE_VERSION:
        raise ValueError(f"/feature: unsupported version {version!r}")
    status = node.get("status")
    if status not in (ZNODE_DISABLED, ZNODE_ENABLED):
        raise ValueError(f"/feature: malformed status {status!r}")
    if "features" not in node:
        raise ValueError("/feature: the features map is absent")
    levels = _levels_of(node["features"], "/feature")
    return {} if status == ZNODE_DISABLED else levels


def encode_feature_file(epoch: int, levels: Mapping[str, int]) -> bytes:
    """A lone broker's finalized features file: its epoch and levels, JSON."""
    return json.dumps({"version": FILE_VERSION, "epoch": epoch,
                       "features": {n: lv for n, lv in sorted(levels.items()) if lv >= 1}},
                      separators=(",", ":")).encode()


def decode_feature_file(data: bytes) -> tuple[int, dict[str, int]]:
    """``(epoch, levels)`` of :func:`encode_feature_file`'s bytes; ValueError otherwise."""
    try:
        node = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(node, dict) or node.get("version") != FILE_VERSION:
        raise ValueError("not a version 1 finalized features file")
    epoch = node.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise ValueError(f"bad epoch {epoch!r}")
    return epoch, _levels_of(node.get("features"), "finalized features file")
