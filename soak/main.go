// Command soak runs the three flows at once on the local stack under mixed
// faults (throttles, 5xx, latency, dropped connections, redeliveries,
// SIGKILLed function processes, an S3 server restart, the clock across a
// month boundary), drains the pipeline and checks every invariant. It
// writes report.md and timeline.png and exits 1 when an invariant breaks.
//
//	go run ./soak -duration 10m -out soak/out   (make soak)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ddbpipe/ddbpipe/local/badinput"
	"github.com/ddbpipe/ddbpipe/local/servers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
}

func run() error {
	var c Config
	var out, fuzzLog string
	var noFaults bool
	flag.DurationVar(&c.Duration, "duration", 10*time.Minute, "length of the load (the drain and the checks come after)")
	flag.IntVar(&c.VotesPerSecond, "rate", 0, "votes sent per second, fixed (0: sized from the store's ceiling, measured before the load)")
	flag.Float64Var(&c.SteadyShare, "steady", DefaultSteadyShare, "steady votes per second against the store's ceiling (without -rate)")
	flag.Float64Var(&c.BurstShare, "burst", DefaultBurstShare, "votes per second of a burst against the store's ceiling (without -rate)")
	flag.IntVar(&c.Bursts, "bursts", DefaultBursts, "bursts of votes, evenly spaced over the load (without -rate; 0: none)")
	flag.DurationVar(&c.BurstFor, "burst-for", DefaultBurstFor, "length of each burst")
	flag.IntVar(&c.ObjectWorkers, "object-workers", 2, "concurrent document clients")
	flag.IntVar(&c.SharedWorkers, "shared-workers", 2, "concurrent clients writing the same documents under many keys")
	flag.Float64Var(&c.ObjectsPerSecond, "object-rate", DefaultObjectRate, "document requests per second, all workers together")
	flag.BoolVar(&noFaults, "no-faults", false, "no fault injection: a plain load run")
	flag.Float64Var(&c.DuplicateRate, "duplicates", 0.03, "share of SQS and stream batches delivered twice")
	flag.DurationVar(&c.KillEvery, "kill-every", 0, "time between SIGKILLs of a function process (default duration/30, at least 5s)")
	flag.DurationVar(&c.PhaseEvery, "phase", 0, "length of each fault mix (default duration/20, at least 5s)")
	flag.IntVar(&c.StreamShards, "stream-shards", 4, "present each DynamoDB stream as this many shards, as on AWS (1: DynamoDB Local's one)")
	flag.IntVar(&c.StreamSplitAfter, "stream-split-after", 5000, "records after which a stream shard splits in two (0: never)")
	flag.BoolVar(&c.Conflicts, "conflicts", true, "cancel overlapping transactions with TransactionConflict, as DynamoDB does")
	flag.Uint64Var(&c.Seed, "seed", 0, "random seed (default: random; the report prints it)")
	flag.StringVar(&out, "out", "soak/out", "folder for report.md, timeline.png and functions.log")
	flag.StringVar(&fuzzLog, "fuzz-log", "", "output of `make fuzz` to quote in the report (make soak runs it first)")
	flag.Parse()
	c.Faults = !noFaults
	root, err := servers.FindRoot(".")
	if err != nil {
		return err
	}
	c.Root = root
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(out, "functions.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	c.Progress, c.FnLog = os.Stdout, logf
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C ends the process at once
	res, err := Run(ctx, c)
	if err != nil {
		return err
	}
	if fuzzLog != "" {
		b, err := os.ReadFile(fuzzLog)
		if err != nil {
			return err
		}
		res.Fuzz = string(b)
	}
	if err := res.Write(out, res.Load.objectsPerSec, corpusLine()); err != nil {
		return err
	}
	fmt.Printf("\nreport: %s\n", filepath.Join(out, "report.md"))
	for _, i := range res.Invariants {
		mark := "ok  "
		if !i.OK {
			mark = "FAIL"
		}
		fmt.Printf("  %s %s: %s\n", mark, i.Name, i.Figures)
	}
	if n := res.Violations(); n > 0 {
		fmt.Printf("%d invariant violations\n", n)
		os.Exit(1)
	}
	return nil
}

// corpusLine names the bad-input corpus the tests drive through every
// entry point (local/badinput, tests/badinput_test.go).
func corpusLine() string { return badinput.Summary() + "." }
