package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// goalCeilingRatio: the counter's steady rate against the store's ceiling
// for the same puts, in the same run (issue 26).
const goalCeilingRatio = 0.9

// benchCeiling measures the design against the store it runs on. A plain
// loader putting the counter's own ledger items, with the counter's
// condition, as many at once as the counter's invocations can, into the
// month's ledger (its stream on) gives the store's ceiling. The deployed
// counter's steady rate on a backlog in the votes queue is set beside it,
// in alternating slices at the same size of the ledger, with the stream's
// consumers held (on AWS they do not share the table's capacity; here
// they share two cores with the emulator).
func benchCeiling(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	env, err := awsShapedIdle(ctx, func(o *stack.Options) { o.TableWriteScale = 1 })
	if err != nil {
		return nil, err
	}
	defer env.Close()
	d, err := deployed(ctx, env)
	if err != nil {
		return nil, err
	}
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: "ceiling", Options: allOptions, Shards: 8}); err != nil {
		return nil, err
	}
	warmFor := time.Duration(max(scale, 0.25) * float64(20*time.Second))
	l := &votesload.Ceiling{Store: store, PollID: "ceiling", Options: allOptions,
		Writers: d.concurrency * votes.DefaultParallel} // the counter's invocations × its puts in flight each
	// A first load warms DynamoDB Local's JVM; its figure sizes the backlog.
	warm, err := l.Run(ctx, warmFor)
	if err != nil {
		return nil, err
	}
	var releases []func()
	for _, fn := range []string{"TallyFunction", "ArchiverFunction"} {
		release, err := env.Runner.Hold(fn)
		if err != nil {
			return nil, err
		}
		releases = append(releases, release)
	}
	if err := env.Start(ctx); err != nil {
		return nil, err
	}
	sl := ceilingSlices{env: env, store: store, loader: l, slices: ceilingSliceCount, loadFor: 5 * time.Second, counterFor: 15 * time.Second}
	runs, backlog, err := sl.run(ctx, warm)
	if err != nil {
		return nil, err
	}
	for _, release := range releases {
		release()
	}
	for poll, want := range map[string]int{"flood": backlog, "ceiling": int(l.Written())} {
		if err := allCounted(ctx, env, store, poll, want); err != nil {
			return nil, err
		}
	}
	ratios := make([]float64, len(runs))
	for i, r := range runs {
		ratios[i] = r.ratio()
	}
	slices.Sort(ratios)
	ratio := (ratios[(len(ratios)-1)/2] + ratios[len(ratios)/2]) / 2 // the median, of an even count too

	s := &section{title: "Votes: the counter against the store's ceiling"}
	s.printf("A fresh stack (4 stream shards, conflicts on, IAM enforced). The store's ceiling: %d writers at once (the\n"+
		"counter's %d invocations × %d puts each) putting the counter's own ledger items with its condition into the month's\n"+
		"ledger, its stream on, after a first load of %s that warms the emulator's JVM. The counter: a backlog queued with it\n"+
		"held, topped up before each of its slices to twice what the last ceiling puts in a slice (%d votes in all). Then, %d times, the loader alone for %s (the counter held, none of its invocations running),\n"+
		"and the counter alone on the backlog for %s, its steady rate the median of its per-second ledger writes after the\n"+
		"slice's first 2 s; a last loader slice ends it. The emulator's pace drifts over a run, so each counter slice is\n"+
		"set beside the mean of the loader slices either side of it, and the figure is the median of the slices. The ledger\n"+
		"stream's consumers (the tally, the archiver) are held meanwhile (Runner.Hold): on AWS they do not take the table's\n"+
		"capacity, while here they share this machine's %d cores with the emulator. They are released afterwards, and every\n"+
		"vote of the backlog and of the loader is counted at the end.\n\n",
		l.Writers, d.concurrency, votes.DefaultParallel, warmFor.Round(time.Second), backlog, sl.slices, sl.loadFor, sl.counterFor, runtime.NumCPU())
	s.printf("| slice | counter's steady rate (ledger writes/s) | ceiling before / after | against the ceiling |\n|---|---:|---:|---:|\n")
	for i, r := range runs {
		s.printf("| %d | %.0f | %.0f / %.0f | %.2f |\n", i+1, r.steady, r.before, r.after, r.ratio())
	}
	s.printf("\nGoal: steady counting ≥ %.1f × the store's ceiling (the median of the slices): %s (%.2f).\n\n", goalCeilingRatio, metIf(ratio >= goalCeilingRatio), ratio)
	return s, nil
}

// ceilingSliceCount is the number of counter slices set beside the
// store's ceiling.
const ceilingSliceCount = 4

// ceilingSlices alternates the store's loader and the counter on one
// backlog, each alone in its slice.
type ceilingSlices struct {
	env                 *stack.Env
	store               *votesddb.Votes
	loader              *votesload.Ceiling
	slices              int
	loadFor, counterFor time.Duration
}

// ceilingSlice is one slice of the counter's writing and the ceilings
// measured just before and just after it.
type ceilingSlice struct {
	steady        float64
	before, after float64
}

func (c ceilingSlice) ratio() float64 { return c.steady / ((c.before + c.after) / 2) }

// run queues a backlog with the counter held, then runs the slices,
// topping the backlog up before each counter slice so the counter never
// runs dry: twice what the last ceiling would put in a slice. (A backlog
// sized once from the warm-up's ceiling ran out in the second slice: the
// JVM serves far less while it warms up.) It returns the slices and the
// votes queued; the counter is released, on what is left.
func (c ceilingSlices) run(ctx context.Context, warm float64) ([]ceilingSlice, int, error) {
	env := c.env
	if err := c.store.CreatePoll(ctx, votes.Poll{ID: "flood", Options: allOptions, Shards: 8}); err != nil {
		return nil, 0, err
	}
	release, err := env.Runner.Hold("CounterFunction")
	if err != nil {
		return nil, 0, err
	}
	defer func() { release() }()
	queued := 0
	if err := c.topUp(ctx, warm, &queued); err != nil {
		return nil, 0, err
	}
	ceiling, err := c.loaderSlice(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []ceilingSlice
	for i := range c.slices {
		if err := c.topUp(ctx, ceiling, &queued); err != nil {
			return nil, 0, err
		}
		release()
		steady, err := c.counterSlice(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("slice %d: %w", i+1, err)
		}
		if release, err = env.Runner.Hold("CounterFunction"); err != nil {
			return nil, 0, err
		}
		after, err := c.loaderSlice(ctx)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, ceilingSlice{steady: steady, before: ceiling, after: after})
		if debugVotes {
			fmt.Fprintf(os.Stderr, "  ceiling slice %d: counter %.0f/s, loader %.0f then %.0f puts/s, %d votes queued in all\n", i+1, steady, ceiling, after, queued)
		}
		ceiling = after
	}
	return out, queued, nil
}

// topUp queues votes (the counter held) until the queue holds twice what
// rate puts in a counter slice, at least 2,000; queued counts them.
func (c ceilingSlices) topUp(ctx context.Context, rate float64, queued *int) error {
	visible, inFlight, err := votessqs.Depth(ctx, c.env.Clients.SQS, c.env.Vars["VOTES_QUEUE_URL"])
	if err != nil {
		return err
	}
	n := max(int(2*rate*c.counterFor.Seconds()), 2000) - visible - inFlight
	if n <= 0 {
		return nil
	}
	res, err := votesload.Run(ctx, votessqs.NewProducer(c.env.Clients.SQS, c.env.Vars["VOTES_QUEUE_URL"]),
		votesload.Options{PollID: "flood", Options: allOptions, Count: n, Concurrency: 8, Seed: uint64(9 + *queued)})
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("%d votes not sent", res.Failed)
	}
	if err != nil {
		return fmt.Errorf("backlog: %w", err)
	}
	*queued += n
	return nil
}

// loaderSlice waits until none of the counter's invocations runs, then
// measures the store's ceiling for loadFor.
func (c ceilingSlices) loaderSlice(ctx context.Context) (float64, error) {
	for deadline := time.Now().Add(5 * time.Minute); functionStats(c.env.Runner, "CounterFunction").InFlight > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the counter's invocations did not end in 5 minutes")
		}
	}
	return c.loader.Run(ctx, c.loadFor)
}

// counterSlice samples the month's ledger's admitted writes each second
// for counterFor and returns the median after the first 2 s. The backlog
// must outlast it.
func (c ceilingSlices) counterSlice(ctx context.Context) (float64, error) {
	proxy := c.env.Proxies[faultproxy.DynamoDB]
	ledger := ledgerTable(c.env, time.Now())
	admitted := func() float64 {
		for _, t := range proxy.TableStats() {
			if t.Table == ledger {
				return t.AdmittedUnits
			}
		}
		return 0
	}
	last, lastAt := admitted(), time.Now()
	var perSecond []float64
	for end := time.Now().Add(c.counterFor); time.Now().Before(end); {
		time.Sleep(time.Second)
		now, at := admitted(), time.Now()
		perSecond = append(perSecond, (now-last)/at.Sub(lastAt).Seconds())
		last, lastAt = now, at
		if debugVotes {
			fmt.Printf("counter slice: %.0f/s\n", perSecond[len(perSecond)-1])
		}
	}
	visible, inFlight, err := votessqs.Depth(ctx, c.env.Clients.SQS, c.env.Vars["VOTES_QUEUE_URL"])
	if err != nil {
		return 0, err
	}
	if visible+inFlight == 0 {
		return 0, fmt.Errorf("the backlog ran out: the slice's rate is not a steady one")
	}
	if len(perSecond) <= 2 {
		return 0, fmt.Errorf("a counter slice of %s is too short", c.counterFor)
	}
	return median(perSecond[2:]), nil
}

// allCounted waits until a poll's results count want votes.
func allCounted(ctx context.Context, env *stack.Env, store *votesddb.Votes, poll string, want int) error {
	start := time.Now()
	deadline, nextDebug := start.Add(15*time.Minute), start.Add(5*time.Second)
	for {
		t, err := votes.Results(ctx, store, poll, time.Now)
		if err == nil && t.Total == int64(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("poll %s: %d of %d votes counted in 15 minutes (%v)", poll, t.Total, want, err)
		}
		if debugVotes && time.Now().After(nextDebug) {
			nextDebug = nextDebug.Add(5 * time.Second)
			fmt.Fprintf(os.Stderr, "  ceiling %s: poll %s counted %d/%d (%v)", time.Since(start).Round(time.Second), poll, t.Total, want, err)
			for _, fn := range []string{"CounterFunction", "TallyFunction"} {
				st := functionStats(env.Runner, fn)
				fmt.Fprintf(os.Stderr, "; %s %d in flight, %d done, %d errors, %d records", fn, st.InFlight, st.Invocations, st.Errors, st.Records)
			}
			fmt.Fprintln(os.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
