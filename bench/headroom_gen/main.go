// headroom-gen: one producer process for bench/headroom.py (issue 27, "broker headroom").
//
// It connects, waits for the common start time, then produces records of -record-bytes
// (no key, random-free constant payload) as fast as the client allows until -seconds have
// passed or -records were sent, flushes, and prints one JSON line: records and bytes
// acknowledged, the wall time from the start time to the last acknowledgement, and this
// process's own CPU seconds (getrusage). Bounded in records and time; it signals nobody.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "headroom", "topic")
	recordBytes := flag.Int("record-bytes", 100, "value size of each record")
	records := flag.Int64("records", 10_000_000, "at most this many records")
	seconds := flag.Float64("seconds", 5, "stop producing after this many seconds")
	acks := flag.String("acks", "1", "1 or all")
	lingerMs := flag.Int("linger-ms", 5, "producer linger")
	batchBytes := flag.Int("batch-bytes", 65536, "max bytes of one record batch")
	startAt := flag.Int64("start-at-ns", 0, "unix ns to start at (0: now)")
	flag.Parse()

	ack := kgo.LeaderAck()
	if *acks == "all" || *acks == "-1" {
		ack = kgo.AllISRAcks()
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(ack),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(time.Duration(*lingerMs)*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(*batchBytes)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1<<20),
		kgo.MaxBufferedBytes(256<<20),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()
	ctx := context.Background()
	// Metadata and connections before the start time, so the window measures producing.
	warm := &kgo.Record{Value: make([]byte, *recordBytes)}
	if err := client.ProduceSync(ctx, warm).FirstErr(); err != nil {
		fmt.Fprintln(os.Stderr, "warm-up produce:", err)
		os.Exit(2)
	}
	if *startAt > 0 {
		time.Sleep(time.Until(time.Unix(0, *startAt)))
	}
	value := make([]byte, *recordBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	cpu0 := cpuSeconds()
	t0 := time.Now()
	deadline := t0.Add(time.Duration(*seconds * float64(time.Second)))
	cb := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		acked.Add(1)
	}
	var sent int64
	for sent < *records {
		if sent%1024 == 0 && time.Now().After(deadline) {
			break
		}
		client.Produce(ctx, &kgo.Record{Value: value}, cb)
		sent++
	}
	flushCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	flushErr := client.Flush(flushCtx)
	wall := time.Since(t0).Seconds()
	out := map[string]any{
		"records": acked.Load(), "failed": failed.Load(), "sent": sent,
		"bytes": acked.Load() * int64(*recordBytes), "wall_s": wall,
		"cpu_s": cpuSeconds() - cpu0, "start_ns": t0.UnixNano(),
	}
	if e := firstErr.Load(); e != nil {
		out["error"] = e
	}
	if flushErr != nil {
		out["flush_error"] = flushErr.Error()
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
