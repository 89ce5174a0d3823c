"""The invariants, one function per kind of case. A violation is a *finding*:
``(signature, detail)``. The signature (kind of violation, backend, operation, exception
class, file type) groups findings, so one bug that fires a thousand times is one line in the
report, with the first example to reproduce it.

The invariants (issue 8):

* **no crash**: checked by the parent (:mod:`fuzz.workers`);
* **typed errors only**: every exception is a ``seglog.errors.SeglogError`` (the harness
  passes valid arguments, so no ValueError/TypeError is expected either);
* **nothing readable that was not written**: every record read equals the record written
  at that offset (the model), and a batch that decodes has the CRC of bytes a writer made;
* **nothing flushed lost silently**: every record below the durable point is read back, or
  an error is raised, or the recovery report accounts for it (a truncation at or before its
  batch, its segment deleted); after an unclean shutdown records past the durable point may
  go (the torn tail Kafka truncates);
* **the twins agree**: native and pure read the same records or raise the same class.
"""

from __future__ import annotations

from typing import Any

from .observe import attempt, columns_list, record_tuple
from .inputs import CodecInput

_MAX_BATCHES = 32
_MAX_DECODED = 8


class FindingLog:
    """Findings grouped by signature: the first example of each and a count."""

    def __init__(self) -> None:
        self.examples: dict[tuple, Any] = {}
        self.counts: dict[tuple, int] = {}

    def add(self, signature: tuple, example: Any) -> None:
        self.counts[signature] = self.counts.get(signature, 0) + 1
        self.examples.setdefault(signature, example)

    def merge(self, other: dict) -> None:
        for sig, n in other["counts"].items():
            self.counts[sig] = self.counts.get(sig, 0) + n
            self.examples.setdefault(sig, other["findings"][sig])

    def as_dict(self) -> dict:
        return {"findings": dict(self.examples), "counts": dict(self.counts)}

    def __bool__(self) -> bool:
        return bool(self.counts)

    def summary(self, limit: int = 40) -> str:
        lines = []
        for sig, n in sorted(self.counts.items(), key=lambda kv: -kv[1])[:limit]:
            lines.append(f"{n:7d}x {' | '.join(map(str, sig))}\n         e.g. {self.examples[sig]}")
        return "\n".join(lines)


# --- codec -------------------------------------------------------------------------------------

def _header(batch) -> tuple:
    out = []
    for name in ("position", "base_offset", "batch_length", "partition_leader_epoch", "magic",
                 "crc", "attributes", "last_offset_delta", "base_timestamp_ms",
                 "max_timestamp_ms", "producer_id", "producer_epoch", "base_sequence",
                 "record_count", "last_offset", "next_offset", "last_sequence"):
        got = attempt(getattr, batch, name)
        out.append(got[1] if got[0] == "ok" else got)
    return tuple(out)


def observe_codec(be, data: bytes, *, full: bool = True) -> dict:
    """Every parser entry point on ``data``: op name -> ("ok", value) or an error tuple."""
    obs: dict = {}
    batches: list = []

    def walk():
        for batch in be.iter_batches(data):
            batches.append(batch)
            if len(batches) >= _MAX_BATCHES:
                break

    obs["iter"] = attempt(walk)
    obs["headers"] = ("ok", [_header(b) for b in batches])
    obs["_batches"] = batches
    for i, batch in enumerate(batches[:_MAX_DECODED]):
        obs[f"records[{i}]"] = attempt(lambda: [record_tuple(r) for r in batch.records()])
        obs[f"valid[{i}]"] = attempt(batch.is_valid)
        if full:
            obs[f"columns[{i}]"] = attempt(lambda: columns_list(batch.columns()))
            for which, offset in (("base", batch.base_offset), ("next", batch.base_offset + 1),
                                  ("last", batch.base_offset + batch.last_offset_delta)):
                obs[f"record_at[{i}]{which}"] = attempt(
                    lambda: (lambda r: None if r is None else record_tuple(r))(batch.record_at(offset)))
    obs["decode_columns"] = attempt(lambda: columns_list(be.decode_columns(data)))
    if full:
        obs["iter_max"] = attempt(lambda: len(list(be.iter_batches(data, max_batch_bytes=300))))
    return obs


def _norm(outcome) -> tuple:
    return outcome if outcome[0] == "ok" else ("err", outcome[1])


def _covered(data: bytes, header: tuple) -> bytes:
    position, length = header[0], header[2]
    return bytes(data[position + 21:position + 12 + length])


def _crc_ok(crc32c, data: bytes, header: tuple) -> bool:
    return crc32c(_covered(data, header)) == header[5]


def check_codec_input(case: CodecInput, native, pure, log: FindingLog, *, full: bool = True,
                      ref: tuple = ()) -> None:
    """Run ``case`` on both backends and add every violated invariant to ``log``."""
    data = case.data
    example = {"ref": ref, "how": case.how, "hex": data.hex() if len(data) <= 2048 else
               f"<{len(data)} bytes>"}
    outcomes = {}
    for be in (native, pure):
        obs = observe_codec(be, data, full=full)
        outcomes[be.name] = obs
        for op, outcome in obs.items():
            if op.startswith("_"):
                continue
            if outcome[0] == "err" and not outcome[2]:
                opname = op.split("[")[0]
                log.add(("codec", "untyped", be.name, opname, outcome[1]),
                        {**example, "op": op, "error": outcome[3]})
        for header in obs["headers"][1]:
            for field in header:
                if isinstance(field, tuple) and not field[2]:
                    log.add(("codec", "untyped", be.name, "header", field[1]),
                            {**example, "error": field[3]})
        _check_served(be.name, native.crc32c, data, obs, case.known, log, example)
    n_obs, p_obs = outcomes["native"], outcomes["pure"]
    for op in sorted(set(n_obs) | set(p_obs)):
        if op.startswith("_"):
            continue
        a, b = n_obs.get(op, ("missing",)), p_obs.get(op, ("missing",))
        if _norm(a) != _norm(b):
            opname = op.split("[")[0]
            log.add(("codec", "twins-differ", opname,
                     a[1] if a[0] == "err" else a[0], b[1] if b[0] == "err" else b[0]),
                    {**example, "op": op, "native": _brief(a), "pure": _brief(b)})
            break  # the first difference is the interesting one


def _brief(outcome) -> str:
    text = repr(outcome)
    return text if len(text) < 400 else text[:400] + "..."


def _check_served(name, crc32c, data, obs, known, log, example) -> None:
    headers = obs["headers"][1]
    for i, header in enumerate(headers[:_MAX_DECODED]):
        covered = _covered(data, header)
        expected = known.get(covered)
        crc_ok = crc32c(covered) == header[5]
        for op in (f"records[{i}]", f"columns[{i}]"):
            outcome = obs.get(op)
            if outcome is None or outcome[0] != "ok" or not outcome[1]:
                continue
            if not crc_ok:
                log.add(("codec", "served-bad-crc", name, op.split("[")[0]),
                        {**example, "op": op})
            elif expected is not None:
                got = outcome[1]
                base = header[1]
                if op.startswith("records"):
                    rel = [((r[0] - base) & (2**64 - 1), *r[1:]) for r in got]
                    want = expected
                else:
                    rel = [((r[0] - base) & (2**64 - 1), *r[1:]) for r in got]
                    want = [e[:4] for e in expected]
                if rel != want:
                    log.add(("codec", "wrong-records", name, op.split("[")[0]),
                            {**example, "op": op, "got": _brief(("ok", got)),
                             "want": _brief(("ok", want))})
        for which in ("base", "next", "last"):
            outcome = obs.get(f"record_at[{i}]{which}")
            if outcome and outcome[0] == "ok" and outcome[1] is not None and not crc_ok:
                log.add(("codec", "served-bad-crc", name, "record_at"),
                        {**example, "op": f"record_at[{i}]{which}"})
    outcome = obs["decode_columns"]
    if outcome[0] == "ok" and outcome[1]:
        for header in headers:
            if header[13] and not (header[6] & 0x20) and not _crc_ok(crc32c, data, header):
                log.add(("codec", "served-bad-crc", name, "decode_columns"), example)
                break


# --- logs ----------------------------------------------------------------------------------------

def _allowed_loss(model: dict, obs: dict, *, file_kind: str, start: int | None) -> set:
    """Offsets the log may fail to return without raising (see module docstring)."""
    records = model["records"]
    allowed = set()
    if model["shutdown"] != "clean":
        allowed |= {o for o in records if o >= model["durable_end"]}
    report = obs.get("report") or {}
    for base, position, _nbytes, _reason in report.get("truncations", ()):
        for seg, pos, first, last in model["batches"]:
            if seg == base and pos >= position:
                allowed |= set(range(first, last + 1))
        # Recovery cut this segment: the later ones are gone with it.
        for seg, _pos, first, last in model["batches"]:
            if seg > base:
                allowed |= set(range(first, last + 1))
    for low, high in report.get("missing", ()):
        # Offsets the open reported missing ([low, high), with a warning): accounted for.
        allowed |= {o for o in records if low <= o < high}
    for base in report.get("deleted", ()):
        for seg, _pos, first, last in model["batches"]:
            if seg == base:
                allowed |= set(range(first, last + 1))
    if file_kind == "log-start-offset-checkpoint" and start is not None:
        # Kafka trusts this checkpoint: records below the start it names are not served.
        allowed |= {o for o in records if o < start}
    return allowed


def _shifted_last_batch(got, model, *, columns: bool) -> tuple[set, int]:
    """``(offsets, cut)`` when the records ``got[cut:]`` that follow the last record matching
    the model are exactly one written batch served at offsets raised by one positive delta,
    else ``(set(), len(got))``. ``offsets`` are that batch's written offsets.

    That is the one change Kafka's format cannot show: the base offset sits outside the CRC,
    and a batch that ends the log (the last one written, or the last one left after recovery
    cut what followed it) has no later batch, segment or checkpoint to be compared with
    (docs/untrusted-input.md, "Known limits"; Kafka serves it the same way). The harness
    accepts exactly this and nothing else."""
    records = model["records"]
    batches = model.get("batches") or ()
    width = 4
    cut = 0
    for rec in got:
        want = records.get(rec[0])
        if want is None or tuple(rec[1:width]) != tuple(want[1:width]):
            break
        cut += 1
    tail = [tuple(rec) for rec in got[cut:]]
    if not tail:
        return set(), len(got)
    floor = got[cut - 1][0] if cut else -1
    for _seg, _pos, first, last in batches:
        delta = tail[0][0] - first
        if delta <= 0 or first <= floor or len(tail) != last - first + 1:
            continue
        ok = True
        for j, rec in enumerate(tail):
            want = records.get(first + j)
            if (want is None or rec[0] != first + j + delta
                    or tuple(rec[1:width]) != tuple(want[1:width])):
                ok = False
                break
        if ok:
            return set(range(first, last + 1)), cut
    return set(), len(got)


def _check_read_set(tag, got, model, allowed, findings, *, appended=None, columns=False):
    records = model["records"]
    shifted, cut = (_shifted_last_batch(got, model, columns=columns) if appended is None
                    else (set(), len(got)))
    if shifted:
        got = got[:cut]
        allowed = allowed | shifted
    seen = set()
    for rec in got:
        offset = rec[0]
        seen.add(offset)
        if appended is not None and offset == appended:
            continue
        want = records.get(offset)
        if want is not None and columns:
            want = (want[0], want[1], want[2], want[3])
            rec = tuple(rec)
        if want is None or tuple(rec) != tuple(want):
            findings.append(((tag, "not-written"), f"offset {offset}: read {rec!r}, wrote {want!r}"))
            break
    missing = sorted(o for o in records if o not in seen and o not in allowed)
    if missing:
        findings.append(((tag, "lost-silently"),
                         f"{len(missing)} records not read and no error/report, first {missing[:5]}"))


def check_log(model: dict, obs: dict, *, file_kind: str) -> list:
    """Findings of one log observation against the model."""
    findings = []
    error = obs.get("error")
    if error and not error[2]:
        findings.append((("untyped", error[0], error[1]), error[3]))
    first = obs.get("first")
    if first is None:
        return findings
    start = first["start"]
    allowed = _allowed_loss(model, obs, file_kind=file_kind, start=start)
    if first["records"][0] == "ok":
        allowed |= _shifted_last_batch(first["records"][1], model, columns=False)[0]
    quiet = True  # nothing raised while reading
    for op in ("records", "columns"):
        outcome = first[op]
        if outcome[0] == "err":
            quiet = False
            if not outcome[2]:
                findings.append((("untyped", op, outcome[1]), outcome[3]))
            continue
        _check_read_set(op, outcome[1], model, allowed, findings, columns=(op == "columns"))
    for offset, outcome in first["reads"].items():
        if outcome[0] == "err":
            quiet = False
            if not outcome[2]:
                findings.append((("untyped", "read", outcome[1]), outcome[3]))
            continue
        nbytes, head, _next = outcome[1]
        if nbytes == 0 or head is None:
            findings.append((("read", "empty-below-hw"), f"read({offset}) below hw {first['hw']}"))
        elif head[1] < offset:
            findings.append((("read", "batch-before-offset"), f"read({offset}) -> batch {head}"))
        elif head[0] > offset and offset in model["records"] and offset not in allowed:
            findings.append((("read", "skips-offset"), f"read({offset}) -> batch {head}"))
    for ts, outcome in first["timestamps"].items():
        if outcome[0] == "err":
            quiet = False
            if not outcome[2]:
                findings.append((("untyped", "offset_for_timestamp", outcome[1]), outcome[3]))
    if error and error[0] in ("append", "close", "reopen", "reread", "final-close") and quiet:
        findings.append((("writer-broken-after-clean-open", error[0], error[1]), error[3]))
    second = obs.get("second")
    if second is not None and quiet:
        appended = obs.get("appended")
        outcome = second["records"]
        if outcome[0] == "ok":
            got = {r[0]: r for r in outcome[1]}
            if appended not in got or got[appended][3] != b"after-fuzz":
                findings.append((("reopen", "appended-record-lost"), f"offset {appended}"))
            before = {r[0]: r for r in first["records"][1]} if first["records"][0] == "ok" else {}
            gone = sorted(o for o in before if o >= second["start"] and o not in got)
            if gone:
                findings.append((("reopen", "records-lost-after-close"), f"first {gone[:5]}"))
        elif not outcome[2]:
            findings.append((("untyped", "reopen-records", outcome[1]), outcome[3]))
    return findings


def comparable_log(obs: dict) -> dict:
    """The parts of a log observation the twins must agree on."""
    out = {"error": None if not obs.get("error") else (obs["error"][0], obs["error"][1])}
    for key in ("first", "second"):
        part = obs.get(key)
        if part is None:
            continue
        out[key] = {k: _norm(v) if isinstance(v, tuple) else
                    ({kk: _norm(vv) for kk, vv in v.items()} if isinstance(v, dict) else v)
                    for k, v in part.items()}
    report = obs.get("report")
    if report:
        out["report"] = (report["truncations"], report["deleted"], report.get("missing"))
    out["appended"] = obs.get("appended")
    return out


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{path}: {_brief(a)} != {_brief(b)}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=repr):
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'native' if key in a else 'pure'}"
            diff = first_difference(a[key], b[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(a, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff = first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return None if a == b else f"{path}: {_brief(a)} != {_brief(b)}"


# --- stores --------------------------------------------------------------------------------------

def check_store(model: dict, obs: dict, *, file_kind: str) -> list:
    findings = []
    error = obs.get("error")
    if error and not error[2]:
        findings.append((("untyped", error[0], error[1]), error[3]))
    for round_ in ("first", "second"):
        part = obs.get(round_)
        if part is None:
            continue
        # Offsets lost by the log of __consumer_offsets are accounted for when its open
        # reported them, or when its end is past the end written: the one undetectable
        # change, a raised base offset of the batch that ends the log (see
        # _shifted_last_batch), which can also hide a cut before it.
        offsets_lost = any(obs[r].get("__consumer_offsets") and (
            obs[r]["__consumer_offsets"]["truncations"] or obs[r]["__consumer_offsets"]["deleted"]
            or obs[r]["__consumer_offsets"].get("missing")
            or obs[r]["__consumer_offsets"].get("end", 0) > model.get("offsets_end", 1 << 62))
            for r in ("first", "second") if r in obs)
        for p in (0, 1):
            info = part[p]
            outcome = info["records"]
            if outcome[0] == "err":
                if not outcome[2]:
                    findings.append((("untyped", "records", outcome[1]), outcome[3]))
                continue
            records = model["records"][p]
            # What the first open cut stays cut: its report covers the second round too.
            lossy = any(obs[r][p]["report"]["truncations"] or obs[r][p]["report"]["deleted"]
                        or obs[r][p]["report"].get("missing")
                        for r in ("first", "second") if r in obs)
            seen = set()
            for rec in outcome[1]:
                seen.add(rec[0])
                want = records.get(rec[0])
                if want is None or want != rec[1:4]:
                    findings.append(((round_, "not-written"), f"p{p} offset {rec[0]}: {rec!r} vs {want!r}"))
                    break
            missing = []
            for o in records:
                if o in seen or lossy:
                    continue
                if model["shutdown"] != "clean" and o >= model["durable_end"][p]:
                    continue
                if file_kind == "log-start-offset-checkpoint" and o < info["start"]:
                    continue
                missing.append(o)
            if missing:
                findings.append(((round_, "lost-silently"), f"p{p}: {len(missing)} missing, first {missing[:5]}"))
        polled = part.get("poll")
        if polled is not None and polled[0] == "err" and not polled[2]:
            findings.append((("untyped", "poll", polled[1]), polled[3]))
        elif polled is not None and polled[0] == "ok":
            for p, offset, ts, key, value in polled[1]:
                if model["records"][p].get(offset) != (ts, key, value):
                    findings.append(((round_, "poll-not-written"),
                                     f"p{p} offset {offset}: {(ts, key, value)!r} vs "
                                     f"{model['records'][p].get(offset)!r}"))
                    break
        for p, outcome in part["committed"].items():
            if outcome[0] == "err":
                if not outcome[2]:
                    findings.append((("untyped", "committed", outcome[1]), outcome[3]))
                continue
            history = model["committed"][p]
            allowed = {history[-1]}
            if offsets_lost or model["shutdown"] != "clean":
                allowed |= set(history) | {None}
            if outcome[1] not in allowed:
                findings.append(((round_, "committed-offset-not-written"),
                                 f"p{p}: read {outcome[1]}, committed {history}"))
    return findings


def comparable_store(obs: dict) -> dict:
    out = {"error": None if not obs.get("error") else (obs["error"][0], obs["error"][1])}
    for round_ in ("first", "second"):
        part = obs.get(round_)
        if part is None:
            continue
        out[round_] = {
            "topics": part["topics"],
            "committed": {p: _norm(v) for p, v in part["committed"].items()},
            "poll": _norm(part["poll"]) if "poll" in part else None,
            "txn": _norm(part["txn"]) if "txn" in part else None,
            **{p: (_norm(part[p]["records"]), part[p]["start"], part[p]["end"],
                   part[p]["report"]["truncations"], part[p]["report"]["deleted"]) for p in (0, 1)},
        }
    return out
