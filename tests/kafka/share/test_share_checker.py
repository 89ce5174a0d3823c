"""The share-group checker (``share_driver.py``) judges histories: each check finds the
violation it is for in a hand-made bad history and none in a good one (so a scenario that
passes is not passing because its checker cannot fail). No broker."""

from __future__ import annotations

from share_driver import (
    Delivery, check_accepted_exactly_once, check_all_confirmed, check_counts_increase,
    check_no_delivery_after_ack, deliveries_of)


def _d(offset, count, ack, poll_ms, commit_ms=None, result="ok", member="m"):
    return Delivery(poll_ms, member, "t", 0, offset, count, ack,
                    poll_ms + 1 if commit_ms is None else commit_ms, result)


GOOD = [_d(0, 1, "RELEASE", 10), _d(1, 1, "ACCEPT", 10), _d(0, 2, "ACCEPT", 20)]


def test_parse_line():
    d = Delivery.parse("DELIVERY 5 m1 topic 3 42 2 RELEASE 7 ok")
    assert d == Delivery(5, "m1", "topic", 3, 42, 2, "RELEASE", 7, "ok") and d.confirmed
    assert not Delivery.parse("DELIVERY 5 m1 topic 3 42 2 HOLD 5 -").confirmed


def test_good_history_passes_every_check():
    assert check_accepted_exactly_once(GOOD, [(0, 0), (0, 1)]) == []
    assert check_no_delivery_after_ack(GOOD) == []
    assert check_counts_increase(GOOD) == []
    assert check_all_confirmed(GOOD) == []
    assert deliveries_of(GOOD, 0, 0) == [(1, "RELEASE"), (2, "ACCEPT")]


def test_lost_duplicated_and_unknown_records_are_found():
    assert check_accepted_exactly_once(GOOD, [(0, 0), (0, 1), (0, 2)]) == [
        "(0, 2): never accepted"]
    twice = GOOD + [_d(1, 2, "ACCEPT", 30, member="m2")]
    assert check_accepted_exactly_once(twice, [(0, 0), (0, 1)]) == ["(0, 1): accepted 2 times"]
    assert check_accepted_exactly_once(GOOD, [(0, 0)]) == [
        "(0, 1): accepted but never produced"]
    unconfirmed = [_d(0, 1, "ACCEPT", 10, result="TimeoutException")]
    assert check_accepted_exactly_once(unconfirmed, [(0, 0)]) == ["(0, 0): never accepted"]


def test_redelivery_after_a_confirmed_ack_is_found():
    after_accept = GOOD + [_d(1, 2, "RELEASE", 12)]
    assert len(check_no_delivery_after_ack(after_accept)) == 1
    after_reject = [_d(0, 1, "REJECT", 10, commit_ms=11), _d(0, 2, "ACCEPT", 15)]
    assert len(check_no_delivery_after_ack(after_reject)) == 1
    # A delivery polled before the first ACCEPT's commit returned is concurrent, not after.
    concurrent = [_d(0, 1, "ACCEPT", 10, commit_ms=20), _d(0, 1, "ACCEPT", 15, member="m2")]
    assert check_no_delivery_after_ack(concurrent) == []
    # An unconfirmed ACCEPT (lost in a crash) may be followed by a redelivery.
    lost = [_d(0, 1, "ACCEPT", 10, result="none"), _d(0, 1, "ACCEPT", 30)]
    assert check_no_delivery_after_ack(lost) == []


def test_wrong_delivery_counts_and_unconfirmed_acks_are_found():
    assert check_counts_increase([_d(0, 1, "RELEASE", 1), _d(0, 1, "ACCEPT", 2)]) == [
        "(0, 0): delivery counts [1, 1]"]
    assert check_counts_increase([_d(0, 2, "ACCEPT", 1)]) == ["(0, 0): delivery counts [2]"]
    assert check_all_confirmed([_d(0, 1, "ACCEPT", 1, result="none"),
                                _d(1, 1, "HOLD", 1, result="-")]) == [
        "(0, 0): ACCEPT by m not confirmed: none"]
