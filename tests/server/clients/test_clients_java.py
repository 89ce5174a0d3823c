"""Kafka's own Java clients through its console tools (Kafka 4.4's jars, as the tests/kafka
harness runs them), against Kafka and seglog alike: a smoke test of the Java producer and of
the Java consumer in a group."""

from __future__ import annotations

import subprocess

import pytest

from clients_runner import create_topic


def test_java_console_tools(target, differential, unique, tmp_path):
    """Kafka's own console producer and consumer (the Java clients of 4.4) round-trip keyed
    lines."""
    from seglog.bench.kafka import find_kafka
    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    b = target.bootstrap
    create_topic(b, unique)
    lines = [f"key{i}:value {i}" for i in range(20)]
    # The consumer's JVM starts while the producer's runs (each takes seconds to start here);
    # it waits for the twenty records, from the beginning, for up to 30 s.
    consume_cmd = ref.java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        ["--bootstrap-server", b, "--topic", unique, "--from-beginning", "--max-messages", "20",
         "--timeout-ms", "30000", "--formatter-property", "print.key=true",
         "--formatter-property", "print.offset=true", "--formatter-property",
         "key.separator=|"], run_dir=tmp_path)
    consumer = subprocess.Popen(consume_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        produce_cmd = ref.java_command(
            "org.apache.kafka.tools.ConsoleProducer",
            ["--bootstrap-server", b, "--topic", unique, "--reader-property", "parse.key=true",
             "--reader-property", "key.separator=:", "--compression-codec", "lz4"],
            run_dir=tmp_path)
        produced = subprocess.run(produce_cmd, input="\n".join(lines) + "\n",
                                  capture_output=True, text=True, timeout=60, check=False)
        assert produced.returncode == 0, produced.stderr[-2000:]
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(timeout=10)
    assert consumer.returncode == 0, err[-2000:]
    consumed = subprocess.CompletedProcess(consume_cmd, consumer.returncode, out, err)
    got = consumed.stdout.splitlines()
    want = [f"Offset:{i}|key{i}|value {i}" for i in range(20)]
    assert got == want
    differential(got)
