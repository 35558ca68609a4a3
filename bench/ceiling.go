package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
	"github.com/ddbpipe/ddbpipe/tools/votesload"
)

// goalCeilingRatio: the counter's steady rate against the store's ceiling
// for the same puts, in the same run (issue 26).
const goalCeilingRatio = 0.9

// benchCeiling measures the design against the store it runs on: a plain
// loader putting the counter's own ledger items, with the counter's
// condition, as many at once as the counter's invocations can, into a
// table of the ledger's shape (its stream on) gives the store's ceiling;
// the deployed counter's steady rate on a flood through the queue is set
// beside it. The loader runs before and after the flood (DynamoDB Local
// slows as stream records pile up) and the ceiling is their mean.
func benchCeiling(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	env, err := awsShaped(ctx, func(o *stack.Options) { o.TableWriteScale = 1 })
	if err != nil {
		return nil, err
	}
	defer env.Close()
	d, err := deployed(ctx, env)
	if err != nil {
		return nil, err
	}
	month := time.Now().UTC().Format("2006-01")
	scratchPrefix := env.Vars["LEDGER_TABLE_PREFIX"] + "-ceiling"
	if _, err := env.Clients.DynamoDB.CreateTable(ctx, archiveddb.CreateInput(archive.Spec{Name: scratchPrefix + "-" + month, Month: month})); err != nil {
		return nil, fmt.Errorf("scratch ledger: %w", err)
	}
	inFlight := d.concurrency * 16 // the counter's invocations × its puts in flight each
	loadFor := time.Duration(max(scale, 0.25) * float64(20*time.Second))
	scratch := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], scratchPrefix)
	var seq atomic.Int64
	loader := func() (float64, error) {
		var ok atomic.Int64
		var firstErr error
		var mu sync.Mutex
		end := time.Now().Add(loadFor)
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				for time.Now().Before(end) {
					i := seq.Add(1)
					e := votes.Entry{Vote: votes.Vote{VoteID: fmt.Sprint("c", i), PollID: "ceiling", OptionID: allOptions[i%10],
						VoterID: fmt.Sprint("u", i), CastAt: time.Now().UTC()}}
					if err := scratch.PutVote(ctx, e); err != nil {
						mu.Lock()
						firstErr = cmpOr(firstErr, err)
						mu.Unlock()
						continue
					}
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if ok.Load() == 0 {
			return 0, fmt.Errorf("loader: no put succeeded: %w", firstErr)
		}
		return float64(ok.Load()) / loadFor.Seconds(), nil
	}
	before, err := loader()
	if err != nil {
		return nil, err
	}

	// The flood: long enough that the batching window is at most a tenth
	// of the counter's writing, at the ceiling just measured.
	n := max(int(before*10*d.window.Seconds()*1.2), 2000)
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: "flood", Options: allOptions, Shards: 8}); err != nil {
		return nil, err
	}
	proxy := env.Proxies[faultproxy.DynamoDB]
	ledger := env.Vars["LEDGER_TABLE_PREFIX"] + "-" + month
	admitted := func() float64 {
		for _, t := range proxy.TableStats() {
			if t.Table == ledger {
				return t.AdmittedUnits
			}
		}
		return 0
	}
	start := admitted()
	loadErr := make(chan error, 1)
	go func() {
		res, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"]),
			votesload.Options{PollID: "flood", Options: allOptions, Count: n, Concurrency: 8, Seed: 9})
		if err == nil && res.Failed > 0 {
			err = fmt.Errorf("%d votes not sent", res.Failed)
		}
		loadErr <- err
	}()
	var perSecond []float64
	last, lastAt := start, time.Now()
	deadline := time.Now().Add(15 * time.Minute)
	for admitted()-start < float64(n) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the counter wrote %.0f of %d votes in 15 minutes", admitted()-start, n)
		}
		time.Sleep(time.Second)
		now, at := admitted(), time.Now()
		if now > start { // from the first write on
			perSecond = append(perSecond, (now-last)/at.Sub(lastAt).Seconds())
		}
		last, lastAt = now, at
	}
	if err := <-loadErr; err != nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	writing := len(perSecond)
	// Steady state: the middle 80 % of the seconds it wrote.
	cut := perSecond[writing/10 : max(writing-writing/10, writing/10+1)]
	steady := median(cut)
	after, err := loader()
	if err != nil {
		return nil, err
	}
	ceiling := (before + after) / 2

	s := &section{title: "Votes: the counter against the store's ceiling"}
	s.printf("A fresh stack (4 stream shards, conflicts on). The store's ceiling: %d writers at once (the counter's %d\n"+
		"invocations × 16 puts each) putting the counter's own ledger items with its condition into a table of the ledger's\n"+
		"shape, its stream on, for %s, before and after the flood. The counter: %d votes through the votes queue, its\n"+
		"steady rate the median of its per-second ledger writes over the middle 80 %% of the %d s it wrote (the batching\n"+
		"window is %s, %.0f %% of that).\n\n",
		inFlight, d.concurrency, loadFor.Round(time.Second), n, writing, d.window, 100*d.window.Seconds()/float64(max(writing, 1)))
	s.printf("| store's ceiling before / after (puts/s) | counter's steady rate (votes/s) | ratio |\n|---:|---:|---:|\n")
	s.printf("| %.0f / %.0f | %.0f | %.2f |\n\n", before, after, steady, steady/ceiling)
	s.printf("Goal: steady counting ≥ %.1f × the store's ceiling: %s (%.2f).\n\n", goalCeilingRatio, metIf(steady >= goalCeilingRatio*ceiling), steady/ceiling)
	return s, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
