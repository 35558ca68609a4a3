package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
	"github.com/ddbpipe/ddbpipe/tools/pngchart"
	"github.com/ddbpipe/ddbpipe/tools/votesload"
)

// variant is one consumer of the same votes.
type variant struct {
	label string
	// handler builds the function that consumes the queue.
	handler func(ctx context.Context, env *stack.Env, poll string, metrics io.Writer) (any, error)
	// counterKey tells whether a written partition key is one of the
	// poll's counter items.
	counterKey func(poll, key string) bool
	// total reads the poll's count back.
	total func(ctx context.Context, env *stack.Env, poll string) (int64, error)
}

// naive is what public samples do: one UpdateItem ADD per vote on one item.
func naive() variant {
	return variant{
		label: "naive: one ADD per vote, one item",
		handler: func(ctx context.Context, env *stack.Env, poll string, _ io.Writer) (any, error) {
			table := env.Vars["COUNTERS_TABLE_NAME"]
			db := env.Clients.DynamoDB
			// The naive consumer gets its best case: throttled writes are
			// retried (up to 1 s apart, without the SDK's retry quota)
			// until they pass, so it runs at its key's limit instead of
			// failing messages back to the queue for the visibility timeout.
			patient := func(o *dynamodb.Options) {
				o.Retryer = retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(retry.NewStandard(func(so *retry.StandardOptions) {
					so.RateLimiter = ratelimit.None
				}), 1000), time.Second)
			}
			return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				var resp events.SQSEventResponse
				for _, m := range ev.Records {
					v, err := votes.Parse([]byte(m.Body), time.Now())
					if err == nil {
						_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
							TableName:                 aws.String(table),
							Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "naive#" + poll}, "sk": &ddbtypes.AttributeValueMemberS{Value: "total"}},
							UpdateExpression:          aws.String("ADD #o :one"),
							ExpressionAttributeNames:  map[string]string{"#o": "o_" + v.OptionID},
							ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
						}, patient)
					}
					if err != nil {
						resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
					}
				}
				return resp, nil
			}, nil
		},
		counterKey: func(poll, key string) bool { return key == "naive#"+poll },
		total: func(ctx context.Context, env *stack.Env, poll string) (int64, error) {
			out, err := env.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Vars["COUNTERS_TABLE_NAME"]),
				Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "naive#" + poll}, "sk": &ddbtypes.AttributeValueMemberS{Value: "total"}}})
			if err != nil {
				return 0, err
			}
			var n int64
			for k, v := range out.Item {
				if nv, ok := v.(*ddbtypes.AttributeValueMemberN); ok && strings.HasPrefix(k, "o_") {
					var x int64
					fmt.Sscan(nv.Value, &x)
					n += x
				}
			}
			return n, nil
		},
	}
}

// ours runs the counter function's own Setup in the given mode.
func ours(mode votes.Mode) variant {
	return variant{
		label: "ddbpipe " + string(mode),
		handler: func(ctx context.Context, env *stack.Env, poll string, metrics io.Writer) (any, error) {
			fns, err := env.Stack.Functions()
			if err != nil {
				return nil, err
			}
			vars := map[string]string{}
			for _, f := range fns {
				if f.LogicalID == "CounterFunction" {
					vars = f.Env
				}
			}
			vars["COUNTING_MODE"] = string(mode)
			return voteslambda.SetupCounter(ctx, lambdafn.Env{Getenv: func(k string) string { return vars[k] }, AWS: env.AWS,
				Log: slog.New(slog.DiscardHandler), Metrics: metrics})
		},
		counterKey: func(poll, key string) bool { return strings.HasPrefix(key, "count#"+poll+"#") },
		total: func(ctx context.Context, env *stack.Env, poll string) (int64, error) {
			store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
			t, err := votes.Results(ctx, store, poll, time.Now)
			return t.Total, err
		},
	}
}

// scaledKeyLimit is the per-key write limit (write units per second) of the
// scaled runs; 0 skips them. Set by bench's -key-limit flag.
var scaledKeyLimit float64 = 100

// flood is one way of spreading a poll's votes over its options.
type flood struct {
	label   string
	options []string // the options the votes go to; the poll has ten
	seed    uint64   // the same votes for every consumer
}

// mapping is the event source mapping's settings of a run.
type mapping struct {
	concurrency int // ScalingConfig.MaximumConcurrency
	visibility  int // the queue's visibility timeout, seconds
}

// debugVotes prints each run's progress every 5 s (DDBPIPE_BENCH_DEBUG=1).
var debugVotes = os.Getenv("DDBPIPE_BENCH_DEBUG") != ""

// runStats is what one consumer did with one flood.
type runStats struct {
	label string
	n     int
	took  time.Duration
	vps   float64
	// counting is the time from the first invocation's start to the last
	// vote counted: took without the wait for the first batch.
	counting time.Duration
	cvps     float64
	// From the DynamoDB proxy: write requests carrying counter writes,
	// counter writes in all and on the hottest counter key, write units
	// admitted on the counter and ledger keys, writes the key limiter
	// refused on the poll's keys.
	writeRequests, counterWrites, hottest int64
	counterUnits, ledgerUnits             float64
	askedUnits                            float64 // admitted or not
	keyThrottled                          int64
	// From the SQS proxy: requests by kind.
	sqsSend, sqsReceive, sqsDelete, sqsOther int64
	// From the runner: invocations, messages delivered (redeliveries
	// included), time spent in the handler.
	invocations, records int
	handlerTime          time.Duration
	// From our counter's metrics (EMF): transaction retries (conflicts and
	// throttles), throttles, messages failed back to the queue.
	txRetries, throttles, retried float64
}

// firstCall is a handler that notes when it was first invoked.
type firstCall struct {
	lambda.Handler
	once  sync.Once
	start atomic.Int64
}

func (f *firstCall) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.once.Do(func() { f.start.Store(time.Now().UnixNano()) })
	return f.Handler.Invoke(ctx, payload)
}

func (f *firstCall) at() time.Time { return time.Unix(0, f.start.Load()) }

func (r runStats) units() float64 { return r.counterUnits + r.ledgerUnits }

// emfSums adds up the metrics of EMF lines written to it.
type emfSums struct {
	mu   sync.Mutex
	sums map[string]float64
}

func (e *emfSums) Write(p []byte) (int, error) {
	var doc map[string]any
	if json.Unmarshal(p, &doc) == nil {
		e.mu.Lock()
		if e.sums == nil {
			e.sums = map[string]float64{}
		}
		for k, v := range doc {
			if f, ok := v.(float64); ok {
				e.sums[k] += f
			}
		}
		e.mu.Unlock()
	}
	return len(p), nil
}

func (e *emfSums) get(name string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sums[name]
}

// runVotes loads n votes of fl into a new queue and a new poll, then
// consumes them with v and measures it.
func runVotes(ctx context.Context, env *stack.Env, v variant, fl flood, n, shards int, m mapping) (runStats, error) {
	allOptions := []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}
	poll := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: shards}); err != nil {
		return runStats{}, err
	}
	q, err := env.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(poll), Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(m.visibility)}})
	if err != nil {
		return runStats{}, err
	}
	url := aws.ToString(q.QueueUrl)
	sqsProxy := env.Proxies[faultproxy.SQS]
	sqsBefore := sqsProxy.Stats()
	load, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, url), votesload.Options{PollID: poll, Options: fl.options, Count: n, Concurrency: 8, Seed: fl.seed})
	if err != nil || load.Failed > 0 {
		return runStats{}, fmt.Errorf("%s: load: %v (%d failed)", v.label, err, load.Failed)
	}
	var metrics emfSums
	h, err := v.handler(ctx, env, poll, &metrics)
	if err != nil {
		return runStats{}, err
	}
	r := runner.New()
	first := &firstCall{Handler: lambda.NewHandler(h)}
	if err := r.AddFunction(runner.Function{LogicalID: "Consumer", Timeout: 15 * time.Minute, Handler: first}); err != nil {
		return runStats{}, err
	}
	if _, err := r.AddSQS(env.Clients.SQS, runner.SQSMapping{Function: "Consumer", QueueURL: url, BatchSize: 1000, Window: 5 * time.Second,
		ReportBatchItemFailures: true, MaxConcurrency: m.concurrency, WaitTime: time.Second}); err != nil {
		return runStats{}, err
	}
	proxy := env.Proxies[faultproxy.DynamoDB]
	before := proxy.Stats()
	start := time.Now()
	stop, err := r.Start(ctx)
	if err != nil {
		return runStats{}, err
	}
	var got int64
	for time.Since(start) < 15*time.Minute {
		t, err := v.total(ctx, env, poll)
		if err == nil {
			got = t
		}
		if t >= int64(n) {
			break
		}
		if debugVotes && time.Since(start)%(5*time.Second) < 100*time.Millisecond {
			fmt.Fprintf(os.Stderr, "  %s %s: %s counted %d/%d, retried %.0f, tx retries %.0f, throttles %.0f, runner %+v\n", fl.label, v.label,
				time.Since(start).Round(time.Second), t, n, metrics.get("VotesRetried"), metrics.get("TransactionRetries"), metrics.get("Throttles"), r.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	stop()
	if got < int64(n) {
		return runStats{}, fmt.Errorf("%s: counted %d of %d after %s", v.label, got, n, took)
	}
	after := proxy.Stats()
	sqsAfter := sqsProxy.Stats()
	counting := start.Add(took).Sub(first.at())
	rs := runStats{label: v.label, n: n, took: took, vps: float64(n) / took.Seconds(), counting: counting, cvps: float64(n) / counting.Seconds(),
		txRetries: metrics.get("TransactionRetries"), throttles: metrics.get("Throttles"), retried: metrics.get("VotesRetried")}
	for _, k := range proxy.HotKeys() {
		switch {
		case v.counterKey(poll, k.Key):
			rs.counterWrites += k.Writes
			rs.hottest = max(rs.hottest, k.Writes)
			rs.keyThrottled += k.Throttled
			rs.counterUnits += k.AdmittedUnits
			rs.askedUnits += k.Units
		case strings.HasPrefix(k.Key, poll+"#"):
			rs.keyThrottled += k.Throttled
			rs.ledgerUnits += k.AdmittedUnits
			rs.askedUnits += k.Units
		}
	}
	rs.writeRequests = delta(before, after, "UpdateItem") + delta(before, after, "TransactWriteItems")
	if strings.Contains(v.label, "at-least-once") {
		rs.writeRequests = delta(before, after, "UpdateItem")
	}
	for action, c := range sqsAfter.ByAction {
		d := c.Forwarded - sqsBefore.ByAction[action].Forwarded
		switch action {
		case "SendMessageBatch", "SendMessage":
			rs.sqsSend += d
		case "ReceiveMessage":
			rs.sqsReceive += d
		case "DeleteMessageBatch", "DeleteMessage":
			rs.sqsDelete += d
		case "CreateQueue":
		default:
			rs.sqsOther += d
		}
	}
	for _, st := range r.Stats() {
		if st.Function == "Consumer" {
			rs.invocations, rs.records, rs.handlerTime = st.Invocations, st.Records, st.Total
		}
	}
	return rs, nil
}

// oursRetrying is ours with the one setting the deployed function does not
// expose: a commit that keeps being throttled is retried until the
// invocation's deadline margin instead of 8 attempts (~3 s of backoff), so
// sustained partition throttling slows the counter down instead of failing
// groups back to the queue for the visibility timeout. The rest is
// SetupCounter's wiring.
func oursRetrying(mode votes.Mode) variant {
	v := ours(mode)
	v.label += ", retried to the deadline"
	v.handler = func(ctx context.Context, env *stack.Env, poll string, metrics io.Writer) (any, error) {
		fns, err := env.Stack.Functions()
		if err != nil {
			return nil, err
		}
		vars := map[string]string{}
		for _, f := range fns {
			if f.LogicalID == "CounterFunction" {
				vars = f.Env
			}
		}
		fenv := lambdafn.Env{Getenv: func(k string) string { return vars[k] }, AWS: env.AWS, Log: slog.New(slog.DiscardHandler), Metrics: metrics}
		counter := &votes.Counter{
			Store:       votesddb.New(awsenv.DynamoDB(env.AWS), vars["COUNTERS_TABLE"], vars["LEDGER_TABLE_PREFIX"]),
			Rejects:     votessqs.NewRejects(sqs.NewFromConfig(env.AWS), vars["REJECTS_QUEUE_URL"]),
			Mode:        mode,
			MaxAttempts: 1000,
			Log:         fenv.Log,
		}
		h := &voteslambda.SQS{Counter: counter, Metrics: lambdafn.NewMetrics(fenv, "counter"), Log: fenv.Log}
		return h.Handle, nil
	}
	return v
}

// benchVotes: the same votes through a naive consumer and through ours, on
// the local stack with AWS's per-partition write limit enforced by the proxy;
// then at scaled partition limits, and the cost per million votes.
func benchVotes(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	n := max(int(20000*scale), 1000)
	const shards = 8
	spread := flood{label: "ten-option spread", options: []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}, seed: 1}
	s := &section{title: "Votes: naive counter against sharded, coalesced counters"}
	s.printf("%d votes over 10 options into SQS, then consumed with BatchSize 1000, a 5 s window and 10 concurrent\n"+
		"invocations. The DynamoDB proxy enforces AWS's 1,000 write units per second per partition key.\n"+
		"Our poll has %d shards. Write units are the proxy's count (transactions count double).\n\n"+
		"| consumer | votes/s | counter write requests per 1,000 votes | hottest counter key share | write units per vote | throttled writes | modelled USD per million votes |\n|---|---|---|---|---|---|---|\n", n, shards)
	rate := pngchart.Chart{Title: "votes counted per second", Unit: "votes/s"}
	reqs := pngchart.Chart{Title: "counter write requests per 1,000 votes", Unit: "requests"}
	hot := pngchart.Chart{Title: "share of counter writes on the hottest key", Unit: ""}
	var rates []float64
	var unscaled []runStats
	for _, v := range []variant{naive(), ours(votes.ExactlyOnce), ours(votes.AtLeastOnce)} {
		rs, err := runVotes(ctx, env, v, spread, n, shards, mapping{concurrency: 10, visibility: 600})
		if err != nil {
			return nil, err
		}
		unscaled = append(unscaled, rs)
		perK := float64(rs.writeRequests) / float64(n) * 1000
		share := float64(rs.hottest) / float64(max(rs.counterWrites, 1))
		perVote := rs.askedUnits / float64(n)
		sqsRequests := float64(n)/10 + float64(n)/10*2 // send batches + receive/delete per 10 messages
		cost := (perVote*float64(1e6)*usdPerMillionWRU + sqsRequests/float64(n)*1e6*usdPerMillionSQS) / 1e6
		rates = append(rates, rs.vps)
		s.printf("| %s | %.0f | %.1f | %.3f | %.2f | %d | %.2f |\n", v.label, rs.vps, perK, share, perVote, rs.keyThrottled, cost)
		rate.Bars = append(rate.Bars, pngchart.Bar{Label: v.label, Value: rs.vps})
		reqs.Bars = append(reqs.Bars, pngchart.Bar{Label: v.label, Value: perK})
		hot.Bars = append(hot.Bars, pngchart.Bar{Label: v.label, Value: share})
	}
	s.printf("\nEnd-to-end speed-up of exactly-once over the naive consumer: **%.1f×**; at-least-once: %.1f×. Goal: ≥ 5×, ≤ 20 counter write requests per 1,000 votes, hottest key ≤ 1.5/%d = %.3f.\n"+
		"The modelled cost counts DynamoDB on-demand write units (USD %.3f per million) and SQS requests (USD %.2f per million, a\n"+
		"send per 10 votes and a receive plus a delete per 10 delivered); the naive consumer keeps no ledger, so it cannot deduplicate.\n",
		rates[1]/rates[0], rates[2]/rates[0], shards, 1.5/shards, usdPerMillionWRU, usdPerMillionSQS)
	// What bounds each design on AWS: 1,000 write units per second per
	// partition. The naive counter is one partition; ours spreads counters
	// over the shards and the ledger over LedgerSuffixes calculated suffixes.
	naiveCeiling := 1000.0
	exactlyCeiling := float64(votes.LedgerSuffixes) * 1000 / 2 // a transactional put costs 2 units
	leastCeiling := float64(votes.LedgerSuffixes) * 1000
	s.printf("\nOn this machine DynamoDB Local itself caps the run (about 2,600 transactional or 3,800 batched item writes per\n"+
		"second on 2 cores), so the measured ratios understate the design. On AWS the bound is the partition limit: the\n"+
		"naive counter's one key allows %.0f votes/s; ours allows %.0f votes/s per poll exactly-once (%d ledger partitions ×\n"+
		"1,000 units ÷ 2 units per transactional put; counter writes are ~1%% of that over %d shards) and %.0f at-least-once:\n"+
		"a modelled **%.0f×** and %.0f×.\n", naiveCeiling, exactlyCeiling, votes.LedgerSuffixes, shards, leastCeiling, exactlyCeiling/naiveCeiling, leastCeiling/naiveCeiling)
	s.charts = append(s.charts, rate, reqs, hot)

	if scaledKeyLimit > 0 {
		if err := benchVotesScaled(ctx, env, scale, shards, s); err != nil {
			return nil, err
		}
	}
	votesCost(s, env, unscaled)
	if err := objectsCost(ctx, s, env, scale); err != nil {
		return nil, err
	}
	return s, nil
}

func delta(before, after faultproxy.Stats, action string) int64 {
	return after.ByAction[action].Forwarded - before.ByAction[action].Forwarded
}

// benchVotesScaled runs the three consumers side by side on two floods with
// the proxy's per-key write limit scaled down to scaledKeyLimit, so that the
// partition limit, not DynamoDB Local's own speed, bounds them.
func benchVotesScaled(ctx context.Context, env *stack.Env, scale float64, shards int, s *section) error {
	proxy := env.Proxies[faultproxy.DynamoDB]
	prev := proxy.KeyWriteLimit()
	if err := proxy.SetKeyWriteLimit(scaledKeyLimit); err != nil {
		return err
	}
	defer func() { _ = proxy.SetKeyWriteLimit(prev) }()

	L := scaledKeyLimit
	n := max(int(4000*scale), 1000)
	floods := []flood{
		{label: "one hot option", options: []string{"o0"}, seed: 2},
		{label: "ten-option spread", options: []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}, seed: 3},
	}
	s.printf("\n### At scaled partition limits: %.0f write units per second per key\n\n", L)
	s.printf("DynamoDB Local on this machine commits about 2,600 transactional item writes per second in all: at AWS's 1,000 units\n"+
		"per second per key it caps our consumer long before the partition limit our design spreads over, while the naive\n"+
		"consumer's one key binds it at once. Here the proxy's limit is scaled down %.0f× to %.0f write units per second per partition\n"+
		"key (`-key-limit`, `make bench KEY_LIMIT=…`), since the emulator runs at roughly a tenth of DynamoDB's rate. It models every\n"+
		"partition at a tenth of its speed: the naive counter's one item allows %.0f votes/s; ours allows %.0f votes/s exactly-once\n"+
		"(%d ledger keys × %.0f units ÷ 2 units per transactional put; the counter shards take ~1%% of it) and %.0f votes/s\n"+
		"at-least-once (1 unit per put), about %.0f and %.0f item writes per second: under what DynamoDB Local sustains, so the ratio\n"+
		"measures the partitions, not the emulator. Each flood is the same %d votes (same seed) for the three consumers, queued first,\n"+
		"then consumed with BatchSize 1000, a 5 s window and 10 concurrent invocations. The naive consumer retries its throttled\n"+
		"writes until they pass (its best case; with the SDK's default 3 attempts it would fail messages back to the queue for the\n"+
		"visibility timeout).\n\n",
		awsKeyLimit()/L, L, L, float64(votes.LedgerSuffixes)*L/2, votes.LedgerSuffixes, L, float64(votes.LedgerSuffixes)*L,
		float64(votes.LedgerSuffixes)*L/2, float64(votes.LedgerSuffixes)*L, n)
	s.printf("\"End to end\" runs from the consumer's start to the last vote counted; \"counting\" from the first invocation's start,\n" +
		"leaving out the wait for the first batch (the runner's pollers split the queued flood and each waits out its 5 s window\n" +
		"for a batch that will not fill), a fixed cost of a finite flood that a continuous one does not pay in throughput.\n\n")
	s.printf("| flood | consumer | votes/s end to end | ÷ naive | votes/s counting | ÷ naive | end to end | counting | write units per vote | writes refused by the key limit | transaction retries | messages failed back | invocations | messages per invocation | mean invocation |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ratio := pngchart.Chart{Title: fmt.Sprintf("ours ÷ naive at %.0f write units/s per key, end to end", L), Unit: "×"}
	// ratios are ours ÷ naive, end to end and counting, for exactly-once
	// as deployed, exactly-once retried to the deadline, at-least-once.
	type ratios struct{ e2e, counting [3]float64 }
	var got []ratios
	var all [][]runStats
	for _, fl := range floods {
		var runs []runStats
		for _, v := range []variant{naive(), ours(votes.ExactlyOnce), oursRetrying(votes.ExactlyOnce), ours(votes.AtLeastOnce)} {
			// The naive consumer never fails a message back (it retries
			// until its writes pass), but its invocations run for most of
			// the flood: its visibility timeout stays long, so no message
			// is delivered again while it is still being counted.
			m := mapping{concurrency: 10, visibility: 600}
			if !strings.HasPrefix(v.label, "naive") {
				m = mapping{concurrency: scaledOursConcurrency, visibility: scaledVisibility}
			}
			rs, err := runVotes(ctx, env, v, fl, n, shards, m)
			if err != nil {
				return fmt.Errorf("scaled, %s: %w", fl.label, err)
			}
			runs = append(runs, rs)
			mean := time.Duration(0)
			if rs.invocations > 0 {
				mean = rs.handlerTime / time.Duration(rs.invocations)
			}
			tx := "–"
			if !strings.HasPrefix(v.label, "naive") {
				tx = fmt.Sprintf("%.0f", rs.txRetries)
			}
			s.printf("| %s | %s | %.0f | %.2f× | %.0f | %.2f× | %s | %s | %.2f | %d | %s | %.0f | %d | %.0f | %s |\n", fl.label, v.label,
				rs.vps, rs.vps/runs[0].vps, rs.cvps, rs.cvps/runs[0].cvps,
				rs.took.Round(100*time.Millisecond), rs.counting.Round(100*time.Millisecond), rs.units()/float64(n),
				rs.keyThrottled, tx, rs.retried, rs.invocations,
				float64(rs.records)/float64(max(rs.invocations, 1)), mean.Round(time.Millisecond))
		}
		var r ratios
		for i := range 3 {
			r.e2e[i] = runs[i+1].vps / runs[0].vps
			r.counting[i] = runs[i+1].cvps / runs[0].cvps
		}
		got = append(got, r)
		all = append(all, runs)
		ratio.Bars = append(ratio.Bars,
			pngchart.Bar{Label: fl.label + ", exactly-once", Value: r.e2e[0]},
			pngchart.Bar{Label: fl.label + ", exactly-once retried to the deadline", Value: r.e2e[1]},
			pngchart.Bar{Label: fl.label + ", at-least-once", Value: r.e2e[2]})
	}
	s.printf("\n| flood | exactly-once ÷ naive | exactly-once retried to the deadline ÷ naive | at-least-once ÷ naive | ceiling at this limit (exactly-once, at-least-once) |\n|---|---:|---:|---:|---:|\n")
	for i, fl := range floods {
		g := got[i]
		s.printf("| %s | **%.1f×** (counting %.1f×) | **%.1f×** (counting %.1f×) | %.1f× (counting %.1f×) | %.0f×, %.0f× |\n", fl.label,
			g.e2e[0], g.counting[0], g.e2e[1], g.counting[1], g.e2e[2], g.counting[2], float64(votes.LedgerSuffixes)/2, float64(votes.LedgerSuffixes))
	}
	s.printf("\nEach key's bucket starts full (one second of its limit), so a run's first votes pass at once: %.0f for the naive\n"+
		"consumer, %.0f exactly-once (%.0f per ledger key); over %d votes that lets a measured ratio come out a little above\n"+
		"the steady ceiling.\n", L, float64(votes.LedgerSuffixes)*L/2, L/2, n)
	verdict := func(x float64) string {
		if x >= 5 {
			return fmt.Sprintf("met (%.1f×)", x)
		}
		return fmt.Sprintf("not met (%.1f×, %.1f× short)", x, 5-x)
	}
	hot := all[0]
	s.printf("\nGoal: exactly-once ≥ 5× the naive consumer on the hot flood, end to end: as deployed **%s**; retried to the deadline **%s**.\n",
		verdict(got[0].e2e[0]), verdict(got[0].e2e[1]))
	s.printf("As deployed, the figure is all or nothing: it depends on whether any group of the flood exhausts its 8 commit attempts\n"+
		"(%.0f messages failed back on the hot flood, %.0f on the spread, in this run). With none it runs near its ceiling; with one,\n"+
		"the run waits out the visibility timeout and the ratio falls to about %.1f× (%d votes in the timeout's %d s and the\n"+
		"first window's 5 s). Retried to the deadline it fails none back\n"+
		"and held its ceiling in every run made so far at the default scale (below it, the first batching window outweighs the\n"+
		"counting): that is the figure to judge the design by, and the setting to expose.\n",
		all[0][1].retried, all[1][1].retried, float64(n)/float64(scaledVisibility+5)/all[0][0].vps, n, scaledVisibility)
	s.printf("\nWhere the time goes. The naive consumer sits at its one key's limit from its first write (%.0f votes/s counting, the\n"+
		"limit %.0f; %d writes refused and retried). Exactly-once as deployed commits each group of up to 100 votes in one\n"+
		"transaction that writes to all %d ledger keys at once, and the key limit admits a transaction only when every key it\n"+
		"writes has the tokens for its share: near the limit whole transactions are refused (%d refused writes, %.0f transaction\n"+
		"retries on the hot flood). The counter retries a group 8 times over about 3 s of backoff, a budget sized for transaction\n"+
		"conflicts, not for sustained partition throttling; then it fails the group's messages back to the queue (%.0f here),\n"+
		"which come back after the visibility timeout (%d s in this bench; the template's is six times the counter's timeout)%s. Retried to the deadline (MaxAttempts 1000, the invocation's deadline margin\n"+
		"still bounding it; a setting SetupCounter does not expose today) nothing is failed back (%.0f) and it counts at %.0f votes/s,\n"+
		"against a ceiling of %.0f. Our consumer runs here with CounterMaxConcurrency %d (a template parameter; fewer concurrent\n"+
		"transactions contending for the same ledger keys); the naive one keeps 10, which already saturates its key. At-least-once\n"+
		"writes its ledger with BatchWriteItem, one unit per entry, and was refused %d writes.\n",
		hot[0].cvps, L, hot[0].keyThrottled, votes.LedgerSuffixes, hot[1].keyThrottled, hot[1].txRetries, hot[1].retried, scaledVisibility,
		waitNote(hot[1]), hot[2].retried, hot[2].cvps, float64(votes.LedgerSuffixes)*L/2, scaledOursConcurrency, hot[3].keyThrottled)
	s.printf("\nWhat would differ on AWS: every rate ×%.0f, so the fixed costs (the first batching window, the last batch) weigh ten\n"+
		"times less; a new on-demand table (each month's ledger is one) serves about 4,000 write units per second until DynamoDB has\n"+
		"scaled it (or it is pre-warmed with warm throughput), which caps exactly-once near 2,000 votes/s at first, still 2× the\n"+
		"naive counter's hard 1,000 on one item that no partition split helps; and the ledger keys of one poll may share a physical\n"+
		"partition until DynamoDB splits it for heat, which this per-key model does not show.\n", awsKeyLimit()/L)
	s.charts = append(s.charts, ratio)
	return nil
}

// waitNote says how much of a run the visibility timeout took, when it
// failed messages back.
func waitNote(r runStats) string {
	if r.retried == 0 {
		return ": none was, in this run"
	}
	return fmt.Sprintf(": that wait, not DynamoDB, is most of its %s", r.took.Round(100*time.Millisecond))
}

// The scaled runs' mapping: our consumer at CounterMaxConcurrency
// scaledOursConcurrency (tuned: see the report), the naive one at 10; a
// message failed back waits scaledVisibility seconds.
var (
	scaledOursConcurrency = envInt("DDBPIPE_BENCH_OURS_CONCURRENCY", 2)
	scaledVisibility      = envInt("DDBPIPE_BENCH_VISIBILITY", 30)
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// awsKeyLimit is AWS's per-partition write limit the scale is taken from.
func awsKeyLimit() float64 { return faultproxy.DefaultKeyWriteLimit }
