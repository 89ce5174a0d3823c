"""Replay cases of a fuzz run by seed and case number, printing what each backend did.

From the repository root::

    PYTHONPATH=src:tests python3 -m fuzz.replay log   <seed> <case> [<case> ...]
    PYTHONPATH=src:tests python3 -m fuzz.replay store <seed> <case> ...
    PYTHONPATH=src:tests python3 -m fuzz.replay codec <seed> <index> ...

``seed`` and ``case`` are printed with every finding (the long tests add an offset to the
test's seed: the printed seed is the one to use). The mutated directory of a file case is
left under ``$TMPDIR/seglog-fuzz-replay/w0-<backend>`` (after the run) for a closer look.
"""

from __future__ import annotations

import os
import sys
import tempfile

from . import checks, corpus, inputs, seeds
from .campaign import FileCampaign, log_file_kinds


def main(argv: list[str]) -> int:
    kind, seed, cases = argv[0], int(argv[1]), [int(c) for c in argv[2:]]
    if kind == "codec":
        import seglog

        log = checks.FindingLog()
        for index in cases:
            case = inputs.codec_input(seed, index)
            print(f"input {index}: {case.how}\n  {case.data.hex()}")
            checks.check_codec_input(case, seglog.get_backend("native"),
                                     seglog.get_backend("pure"), log, ref=(seed, index))
        print(log.summary() or "no finding")
        return 1 if log else 0
    root = os.path.join(tempfile.gettempdir(), "seglog-fuzz-replay")
    os.makedirs(root, exist_ok=True)
    made = (seeds.make_seed_logs if kind == "log" else seeds.make_seed_stores)(
        tempfile.mkdtemp(dir=root))
    campaign = FileCampaign(out_dir=root, workers=1)
    count = max(cases) + 1
    if kind == "log":
        campaign.run(kind_name="log", seed=seed, count=count, seeds=made, handler="log",
                     kinds_of=log_file_kinds, check=checks.check_log,
                     comparable=checks.comparable_log, only_cases=set(cases))
    else:
        campaign.run(kind_name="store", seed=seed, count=count, seeds=made, handler="store",
                     kinds_of=corpus.store_files, check=checks.check_store,
                     comparable=checks.comparable_store, only_cases=set(cases))
    print(campaign.log.summary() or "no finding")
    for key, n in sorted(campaign.outcomes.items()):
        print(n, key)
    return 1 if campaign.log else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
