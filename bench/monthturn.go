package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// goalTurnShare: votes of the new month failed back or delayed at the turn
// with warm throughput (issue 26).
const goalTurnShare = 0.01

// turnRun is one month's turn under load.
type turnRun struct {
	label       string
	newWarm     int64 // the new month's warm write units, as DescribeTable reports them
	sent, newMo int64 // votes sent; of them, cast in the new month
	throttled   int64 // the new month's ledger writes refused by its table limit
	redelivered int   // counter deliveries beyond one per vote: votes failed back
	counted     int64
	caughtUp    time.Duration // from the load's end until every vote was counted
	newLimit    float64       // the new month's table limit, units/s (scaled)
}

func (r turnRun) share() float64 {
	return float64(r.throttled+int64(r.redelivered)) / float64(max(r.newMo, 1))
}

// benchMonthTurn turns a month under load twice, on stacks of their own
// with AWS's table-level write limit scaled down: once with a cold new
// table (the rotator may carry no warm throughput over: the
// LedgerWarmWriteUnitsMax parameter at a new table's 4,000) and once warm
// (the template's default: the new month starts with the month before's
// warm throughput). The month before has grown warm with its traffic, as
// on AWS; the arrival rate is twice what a cold table takes.
func benchMonthTurn(ctx context.Context, _ *stack.Env, scale float64) (*section, error) {
	const arrival = 150.0                            // votes a second
	const tableScale = arrival / 2 / 4000            // a cold table takes half the arrivals
	const busyWarm = int64(2 * arrival / tableScale) // the month before's warm write units: twice the arrivals
	load := time.Duration(max(scale, 0.5) * float64(time.Minute))
	var runs []turnRun
	for _, c := range []struct {
		label  string
		params map[string]string
	}{
		{"cold (LedgerWarmWriteUnitsMax=4000)", map[string]string{"LedgerWarmWriteUnitsMax": "4000"}},
		{"warm (the template's defaults)", nil},
	} {
		r, err := turnUnderLoad(ctx, c.params, tableScale, busyWarm, arrival, load)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.label, err)
		}
		r.label = c.label
		runs = append(runs, r)
	}

	s := &section{title: "Votes: a month's turn under load, cold and warm"}
	s.printf("Two fresh stacks (4 stream shards, conflicts on), each new on-demand table limited to %.4g × AWS's 4,000 write units a\n"+
		"second or its warm throughput (`-table-write-scale`). The month before has grown warm with its traffic (warm throughput\n"+
		"%d write units, as `UpdateTable` sets it), then the rotator runs as its schedule would and the votes cross midnight UTC\n"+
		"halfway through %s at %.0f votes a second. Failed back: counter deliveries beyond one per vote. Delayed: the new month's\n"+
		"ledger writes refused by its table limit (a vote may be refused more than once, so this counts high).\n\n",
		tableScale, busyWarm, load.Round(time.Second), arrival)
	s.printf("| new month's table | its warm write units | its limit (units/s) | votes sent | of them in the new month | writes refused | votes failed back | share of the new month's votes | counted | caught up after the load |\n")
	s.printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		s.printf("| %s | %d | %.0f | %d | %d | %d | %d | %.2f %% | %d | %s |\n", r.label, r.newWarm, r.newLimit, r.sent, r.newMo,
			r.throttled, r.redelivered, 100*r.share(), r.counted, r.caughtUp.Round(100*time.Millisecond))
	}
	warm := runs[len(runs)-1]
	s.printf("\nGoal: votes failed back or delayed at the turn ≤ %.0f %% with warm throughput: %s (%.2f %%, cold: %.2f %%).\n\n",
		100*goalTurnShare, metIf(warm.share() <= goalTurnShare && warm.counted == warm.sent), 100*warm.share(), 100*runs[0].share())
	return s, nil
}

// turnUnderLoad runs one month's turn on a stack of its own.
func turnUnderLoad(ctx context.Context, params map[string]string, tableScale float64, busyWarm int64, arrival float64, load time.Duration) (turnRun, error) {
	real := time.Now()
	boundary := ledger.End(real)
	// During the setup the clock stands an hour before the boundary: the
	// rotator creates that month's table and the next.
	setupOffset := boundary.Add(-time.Hour).Sub(real)
	env, err := awsShapedIdle(ctx, func(o *stack.Options) {
		o.TableWriteScale = tableScale
		o.Params = params
		o.ClockOffset = setupOffset
	})
	if err != nil {
		return turnRun{}, err
	}
	defer env.Close()
	prefix := env.Vars["LEDGER_TABLE_PREFIX"]
	oldTable, newTable := ledgerTable(env, boundary.Add(-time.Hour)), ledgerTable(env, boundary)
	var r turnRun
	if r.newWarm, err = rotateWarm(ctx, env, []string{oldTable, env.Vars["COUNTERS_TABLE_NAME"]}, newTable, busyWarm); err != nil {
		return turnRun{}, err
	}
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], prefix)
	const poll = "turn"
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: 8}); err != nil {
		return turnRun{}, err
	}
	if err := env.Start(ctx); err != nil {
		return turnRun{}, err
	}
	// The load's clock crosses the boundary halfway through it.
	offset := boundary.Sub(time.Now().Add(load / 2))
	if err := env.MoveClock(offset); err != nil {
		return turnRun{}, err
	}
	var newMonth atomic.Int64
	now := func() time.Time {
		t := time.Now().Add(offset)
		if !t.Before(boundary) {
			newMonth.Add(1)
		}
		return t
	}
	n := int(arrival * load.Seconds())
	virtual := func() time.Time { return time.Now().Add(offset) }
	res, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, env.Vars["VOTES_QUEUE_URL"], votessqs.WithClock(virtual)),
		votesload.Options{PollID: poll, Options: allOptions, Count: n, Rate: arrival, Concurrency: 4, Seed: 11, Now: now})
	if err != nil || res.Failed > 0 {
		return turnRun{}, fmt.Errorf("load: %v (%d not sent)", err, res.Failed)
	}
	loaded := time.Now()
	r.sent, r.newMo = int64(n), newMonth.Load()
	if r.counted, err = awaitCounted(ctx, store, poll, r.sent, virtual); err != nil {
		return turnRun{}, err
	}
	r.caughtUp = time.Since(loaded)
	for _, t := range env.Proxies[faultproxy.DynamoDB].TableStats() {
		if t.Table == newTable {
			r.throttled, r.newLimit = t.Throttled, t.Limit
		}
	}
	counter := functionStats(env.Runner, "CounterFunction")
	r.redelivered = max(counter.Records-n, 0)
	if debugVotes {
		fmt.Printf("turn %v: %+v\n", params, r)
	}
	return r, nil
}

// rotateWarm warms the busy tables (the month before, the counters) to
// busyWarm write units a second, as their traffic would have, runs the
// rotator as its schedule would, and returns the new month's table's warm
// write units.
func rotateWarm(ctx context.Context, env *stack.Env, busy []string, newTable string, busyWarm int64) (int64, error) {
	for _, t := range busy {
		if _, err := env.Clients.DynamoDB.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(t),
			WarmThroughput: &ddbtypes.WarmThroughput{WriteUnitsPerSecond: aws.Int64(busyWarm)}}); err != nil {
			return 0, fmt.Errorf("warm %s: %w", t, err)
		}
	}
	if err := env.Rotate(ctx); err != nil {
		return 0, err
	}
	d, err := env.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(newTable)})
	if err != nil {
		return 0, err
	}
	if wt := d.Table.WarmThroughput; wt != nil {
		return aws.ToInt64(wt.WriteUnitsPerSecond), nil
	}
	return 0, nil
}

// awaitCounted reads the poll's results until they count sent votes, for
// up to 15 minutes, and returns the last count.
func awaitCounted(ctx context.Context, store *votesddb.Votes, poll string, sent int64, now func() time.Time) (int64, error) {
	var counted int64
	deadline := time.Now().Add(15 * time.Minute)
	for counted < sent {
		if time.Now().After(deadline) {
			return counted, fmt.Errorf("%d of %d votes counted 15 minutes after the load", counted, sent)
		}
		time.Sleep(200 * time.Millisecond)
		if t, err := votes.Results(ctx, store, poll, now); err == nil {
			counted = t.Total
		}
	}
	return counted, nil
}
