package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// benchOverload sends votes for a while at twice what the month's ledger
// table takes (its write limit set to half the arrival rate), as a cold
// table or a slow store would, and measures where the backlog waits: the
// votes queue (good) or the dead-letter queue (bad), and how long the
// drain takes against backlog ÷ the table's rate.
func benchOverload(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	const arrival = 100.0 // votes a second
	limit := arrival / 2
	load := time.Duration(max(scale, 0.2) * float64(3*time.Minute))
	s := &section{title: "Votes: overload, the ledger taking half the arrival rate"}
	env, err := awsShaped(ctx, func(o *stack.Options) { o.TableWriteScale = 1 })
	if err != nil {
		return nil, err
	}
	defer env.Close()
	proxy := env.Proxies[faultproxy.DynamoDB]
	ledger := ledgerTable(env, time.Now())
	if err := proxy.SetTableWriteLimit(ledger, limit); err != nil {
		return nil, err
	}
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	poll := "overload"
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: 8}); err != nil {
		return nil, err
	}
	producer := votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"])
	n := int(arrival * load.Seconds())
	res, err := votesload.Run(ctx, producer, votesload.Options{PollID: poll, Options: allOptions, Count: n, Rate: arrival, Concurrency: 4, Seed: 5})
	if err != nil || res.Failed > 0 {
		return nil, fmt.Errorf("load: %v (%d failed)", err, res.Failed)
	}
	loaded := time.Now()
	ledgerAtEnd := tableStat(proxy, ledger)
	atEnd, _ := votes.Results(ctx, store, poll, time.Now)
	deadline := loaded.Add(20 * time.Minute)
	var counted int64
	// When the drain had counted 90 % and 99 % of the backlog: a long last
	// stretch is votes waiting out their give-back delay while the table
	// has room.
	var at90, at99 time.Duration
	for {
		t, err := votes.Results(ctx, store, poll, time.Now)
		if err == nil {
			counted = t.Total
		}
		left := float64(int64(n) - counted)
		if at90 == 0 && left <= 0.1*float64(int64(n)-atEnd.Total) {
			at90 = time.Since(loaded)
		}
		if at99 == 0 && left <= 0.01*float64(int64(n)-atEnd.Total) {
			at99 = time.Since(loaded)
		}
		if counted >= int64(n) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	drained := time.Since(loaded)
	visible, inFlight, err := votessqs.Depth(ctx, env.Clients.SQS, env.Vars["VOTES_DEAD_LETTER_QUEUE_URL"])
	if err != nil {
		return nil, err
	}
	dlq := visible + inFlight
	backlog := float64(int64(n) - atEnd.Total)
	ideal := time.Duration(backlog / limit * float64(time.Second))
	counter := functionStats(env.Runner, "CounterFunction")
	ledgerStat := tableStat(proxy, ledger)
	drainUnits := (ledgerStat.AdmittedUnits - ledgerAtEnd.AdmittedUnits) / drained.Seconds()
	s.printf("A fresh stack (4 stream shards, conflicts on, the template's counter mapping: BatchSize, window, concurrency,\n"+
		"a %s s visibility timeout and %s receives) takes %.0f votes a second for %s while the month's ledger table takes %.0f\n"+
		"write units a second (`SetTableWriteLimit`, as a cold or slow table would). Ideal drain: the backlog when the load\n"+
		"ends ÷ the table's rate.\n\n", visibility(env), receives(env), arrival, load.Round(time.Second), limit)
	s.printf("| votes sent | counted | dead letters | backlog at the load's end | drain (90 %%, 99 %% of it) | ideal drain | ledger units admitted a second in the drain | ledger writes throttled | counter invocations, messages delivered |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	s.printf("| %d | %d | %d | %.0f | %s (%s, %s) | %s | %.1f | %d | %d, %d |\n\n", n, counted, dlq, backlog, drained.Round(time.Second), at90.Round(time.Second), at99.Round(time.Second),
		ideal.Round(time.Second), drainUnits, ledgerStat.Throttled, counter.Invocations, counter.Records)
	s.printf("Goals: 0 dead letters: %s; every vote counted: %s; drain within 20 %% of the ideal: %s (%.2f×).\n\n",
		metIf(dlq == 0), metIf(counted == int64(n)), metIf(drained.Seconds() <= 1.2*ideal.Seconds()), drained.Seconds()/max(ideal.Seconds(), 0.001))
	return s, nil
}

// tableStat is the table's write activity under the proxy's table limit.
func tableStat(proxy *faultproxy.Proxy, table string) faultproxy.TableStat {
	for _, t := range proxy.TableStats() {
		if t.Table == table {
			return t
		}
	}
	return faultproxy.TableStat{Table: table}
}

// visibility and receives are the votes queue's, from the template's
// parameters as the stack resolved them.
func visibility(env *stack.Env) string { return param(env, "VotesVisibilityTimeoutSeconds") }
func receives(env *stack.Env) string   { return param(env, "VotesMaxReceiveCount") }

func param(env *stack.Env, name string) string {
	if v, ok := env.Stack.Context.Params[name]; ok {
		return v
	}
	return "?"
}
