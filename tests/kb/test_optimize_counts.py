"""The counts ``kernelkb optimize`` prints agree: --max-iters counts rounds, and each shape
regime's baseline is said apart (a 3-round run over 3 regimes once said "after 5
rounds"). Real RoundOutcome values, as the loop makes them."""

from __future__ import annotations

from kernelkb.cli.optimize import rounds_text
from kernelkb.optimizer.loop import RoundOutcome


def _outcome(iteration: int, kind: str) -> RoundOutcome:
    return RoundOutcome(iteration, kind, "a summary", "neutral", None, None, improved=False)


def test_three_regimes_of_one_round_each_are_three_rounds() -> None:
    rounds = [_outcome(i, kind) for _ in range(3) for i, kind in enumerate(("baseline",
                                                                             "exploit"))]
    assert rounds_text(rounds) == "3 rounds (and 3 baselines, one per shape regime)"


def test_one_regime_says_its_rounds_alone() -> None:
    assert rounds_text([_outcome(0, "baseline"), _outcome(1, "exploit"),
                        _outcome(2, "explore")]) == "2 rounds"
    assert rounds_text([_outcome(0, "baseline"), _outcome(1, "exploit")]) == "1 round"


def test_the_journaled_count_says_what_its_records_are(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"6 journaled" beside "3 rounds" read as a contradiction: the summary names the
    records' kinds, so the figures add up."""
    from kb_testdata import record_dict

    from kernelkb.kb.record import ExperienceRecord
    from kernelkb.optimizer.writeback import Journal, Writeback

    writeback = Writeback(None, Journal(tmp_path / "journal.jsonl"))
    for regime in range(3):
        for i, kind in enumerate(("baseline", "exploit")):
            rec = record_dict(run="r", iteration=i, summary=f"{regime}/{i}")
            rec["provenance"]["round_kind"] = kind
            assert writeback.write(ExperienceRecord.model_validate(rec)) == "journaled"
    text = writeback.summary()
    assert text.startswith("6 records (3 rounds, 3 baselines): 0 experiences stored, "
                           "6 journaled to "), text


def test_the_spinner_says_a_final_sweep_is_no_round() -> None:
    from kernelkb.cli.optimize import spinner_text

    done = [_outcome(0, "baseline"), _outcome(1, "exploit"), _outcome(2, "exploit")]
    assert spinner_text("softmax", 3, "sweep", "medium_rows", done, 2) == \
        "optimize softmax: final sweep of medium_rows (2 of at most 2 rounds done)"
    assert spinner_text("softmax", 1, "exploit", None, done[:1], 3) == \
        "optimize softmax: round 1 (0 of at most 3 rounds done)"
