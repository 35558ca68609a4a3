package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
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
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
	"github.com/ddbpipe/ddbpipe/tools/pngchart"
	"github.com/ddbpipe/ddbpipe/tools/votesload"
)

// scaledKeyLimit is the per-key write limit (write units per second) of the
// scaled runs; 0 skips them. Set by bench's -key-limit flag.
var scaledKeyLimit float64 = 100

// The goals for the votes flow.
const (
	goalUnitsPerVote  = 1.1  // ledger + counters + checkpoints
	goalUSDPerMillion = 0.80 // modelled, see votesCost
	goalCostRatio     = 1.05 // ddbpipe ÷ naive, Lambda at AWS's latencies (issue 26)
	goalHotRatio      = 12.0 // ddbpipe ÷ naive, end to end, hot flood
	goalHotKeyLimit   = 100  // … at this many write units per second per key
	goalHotRuns       = 5    // … in this many consecutive runs, none failing a message back
	goalCaughtUp      = 2.0  // seconds, p99, last vote written → counted
)

// warmUpVotes is the size of the unreported first pass of each consumer.
const warmUpVotes = 2000

// debugVotes prints each run's progress every 5 s (DDBPIPE_BENCH_DEBUG=1).
var debugVotes = os.Getenv("DDBPIPE_BENCH_DEBUG") != ""

// awsKeyLimit is AWS's per-partition write limit the scale is taken from.
func awsKeyLimit() float64 { return faultproxy.DefaultKeyWriteLimit }

// deployment is what template.yaml gives the counter: both consumers get
// its queue mapping, so they differ only in what they do with a batch.
type deployment struct {
	vars        map[string]string // CounterFunction's environment
	timeout     time.Duration     // CounterFunction's timeout
	batch       int               // BatchSize
	window      time.Duration     // MaximumBatchingWindowInSeconds
	concurrency int               // ScalingConfig.MaximumConcurrency
	visibility  int               // the votes queue's visibility timeout, seconds
	shards      int               // a new poll's counter shards (COUNTER_SHARDS)
}

func deployed(ctx context.Context, env *stack.Env) (deployment, error) {
	fns, err := env.Stack.Functions()
	if err != nil {
		return deployment{}, err
	}
	d := deployment{shards: 1}
	for _, f := range fns {
		switch f.LogicalID {
		case "CounterFunction":
			d.vars, d.timeout = f.Env, f.Timeout
			for _, ev := range f.Events {
				if ev.Type == "SQS" {
					p := ev.Properties
					d.batch = atoi(p["BatchSize"])
					d.window = time.Duration(atoi(p["MaximumBatchingWindowInSeconds"])) * time.Second
					scaling, _ := p["ScalingConfig"].(map[string]any)
					d.concurrency = atoi(scaling["MaximumConcurrency"])
				}
			}
		case "VotesApiFunction":
			d.shards = max(atoi(f.Env["COUNTER_SHARDS"]), 1)
		}
	}
	if d.vars == nil || d.batch == 0 || d.concurrency == 0 {
		return deployment{}, fmt.Errorf("template: CounterFunction or its SQS event is missing")
	}
	attrs, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(env.Vars["VOTES_QUEUE_URL"]),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		return deployment{}, fmt.Errorf("votes queue: %w", err)
	}
	d.visibility = atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	return d, nil
}

func atoi(v any) int {
	n, _ := strconv.Atoi(cfn.Scalar(v))
	return n
}

// consumer is one way of consuming the queue of a poll's votes.
type consumer struct {
	label string
	// handler builds the function; metrics receives its EMF lines.
	handler func(ctx context.Context, poll string, metrics io.Writer) (any, error)
	timeout time.Duration
	// total reads the poll's count back.
	total func(ctx context.Context, poll string) (int64, error)
}

const naiveLabel, oursLabel = "naive", "ddbpipe"

// naive is what public samples do: one UpdateItem ADD per vote on one item.
func naive(env *stack.Env) consumer {
	table := env.Vars["COUNTERS_TABLE_NAME"]
	key := func(poll string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "naive#" + poll}, "sk": &ddbtypes.AttributeValueMemberS{Value: "total"}}
	}
	db := env.Clients.DynamoDB
	// Its best case: throttled writes are retried (up to 1 s apart, without
	// the SDK's retry quota) until they pass, so it runs at its key's limit
	// instead of failing messages back to the queue for the visibility
	// timeout. Its long timeout lets an invocation wait that long.
	patient := func(o *dynamodb.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.AddWithMaxAttempts(retry.NewStandard(func(so *retry.StandardOptions) {
			so.RateLimiter = ratelimit.None
		}), 1000), time.Second)
	}
	return consumer{
		label:   naiveLabel,
		timeout: 15 * time.Minute,
		handler: func(ctx context.Context, poll string, _ io.Writer) (any, error) {
			return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				var resp events.SQSEventResponse
				for _, m := range ev.Records {
					v, err := votes.Parse([]byte(m.Body), time.Now())
					if err == nil {
						_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
							TableName: aws.String(table), Key: key(poll),
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
		total: func(ctx context.Context, poll string) (int64, error) {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(poll), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return 0, err
			}
			var n int64
			for k, v := range out.Item {
				if nv, ok := v.(*ddbtypes.AttributeValueMemberN); ok && strings.HasPrefix(k, "o_") {
					x, _ := strconv.ParseInt(nv.Value, 10, 64)
					n += x
				}
			}
			return n, nil
		},
	}
}

// ours is the counter as deployed (SetupCounter with CounterFunction's
// environment), hosted in the run's own runner; the stack's TallyFunction
// counts what it writes from the ledger's stream, so a vote is counted when
// votes.Results shows it.
func ours(env *stack.Env, d deployment) consumer {
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	return consumer{
		label:   oursLabel,
		timeout: d.timeout,
		handler: func(ctx context.Context, _ string, metrics io.Writer) (any, error) {
			return voteslambda.SetupCounter(ctx, lambdafn.Env{Getenv: func(k string) string { return d.vars[k] }, AWS: env.AWS,
				Log: slog.New(slog.DiscardHandler), Metrics: metrics})
		},
		total: func(ctx context.Context, poll string) (int64, error) {
			t, err := votes.Results(ctx, store, poll, time.Now)
			return t.Total, err
		},
	}
}

// flood is one way of spreading a poll's votes over its options.
type flood struct {
	label   string
	options []string // the options the votes go to; the poll has ten
	seed    uint64   // the same voters and options for every consumer
}

var allOptions = []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}

// runStats is what one consumer did with one flood.
type runStats struct {
	consumer string
	flood    string
	n        int
	total    int64 // the count read when it first reached n: n, unless a vote counted twice
	// took runs from the runner's start to the first read showing all n
	// votes; counting from the first invocation's start, leaving out the
	// wait for the first batch; writing from the first invocation's start
	// to the last one's end; caughtUp from the last invocation's end (its
	// last write is just before it) to that first read showing n.
	took, counting, writing, caughtUp time.Duration
	keys                              keyFigures
	// From the counter's EMF (ddbpipe only): messages failed back to the
	// queue.
	failedBack float64
	// From the runner: invocations and messages delivered (redeliveries
	// included), time in the handler.
	invocations, records int
	handlerTime          time.Duration
	sqs                  sqsCounts
	tally                tallyFigures // the stack's tally during the run
}

func (r runStats) vps() float64          { return float64(r.n) / r.took.Seconds() }
func (r runStats) cvps() float64         { return float64(r.n) / r.counting.Seconds() }
func (r runStats) per(x float64) float64 { return x / float64(r.n) }

// unitsPerVote is ledger + counters + checkpoints, per vote.
func (r runStats) unitsPerVote() float64 {
	return r.per(r.keys.ledger + r.keys.counters + r.keys.checkpoints)
}

// writeRate is the consumer's own write units per second while it wrote
// (first invocation to last): the ledger's for ddbpipe, its one item's for
// the naive consumer.
func (r runStats) writeRate() float64 {
	if r.consumer == naiveLabel {
		return r.keys.counters / r.writing.Seconds()
	}
	return r.keys.ledger / r.writing.Seconds()
}

// redelivered is the messages delivered more than once.
func (r runStats) redelivered() int { return max(r.records-r.n, 0) }

// runVotes loads n votes of fl into a new queue for a new poll, then
// consumes them with c under the deployed mapping and measures it.
func runVotes(ctx context.Context, env *stack.Env, d deployment, c consumer, fl flood, n int) (runStats, error) {
	poll := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: d.shards}); err != nil {
		return runStats{}, err
	}
	q, err := env.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(poll),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(d.visibility)}})
	if err != nil {
		return runStats{}, err
	}
	url := aws.ToString(q.QueueUrl)
	requests := queueRequests(env, poll)
	load, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, url), votesload.Options{PollID: poll, Options: fl.options, Count: n, Concurrency: 8, Seed: fl.seed})
	if err != nil || load.Failed > 0 {
		return runStats{}, fmt.Errorf("%s: load: %v (%d failed)", c.label, err, load.Failed)
	}
	var metrics emfSums
	h, err := c.handler(ctx, poll, &metrics)
	if err != nil {
		return runStats{}, err
	}
	r := runner.New()
	timed := &timedHandler{Handler: lambda.NewHandler(h)}
	if err := r.AddFunction(runner.Function{LogicalID: "Consumer", Timeout: c.timeout, Handler: timed}); err != nil {
		return runStats{}, err
	}
	if _, err := r.AddSQS(env.Clients.SQS, runner.SQSMapping{Function: "Consumer", QueueURL: url, BatchSize: d.batch, Window: d.window,
		ReportBatchItemFailures: true, MaxConcurrency: d.concurrency, WaitTime: time.Second}); err != nil {
		return runStats{}, err
	}
	proxy := env.Proxies[faultproxy.DynamoDB]
	keysBefore := proxy.HotKeys()
	tallyBefore := functionStats(env.Runner, "TallyFunction")
	start := time.Now()
	stop, err := r.Start(ctx)
	if err != nil {
		return runStats{}, err
	}
	counted, total, err := waitCounted(ctx, c, poll, n, func() string {
		tally, archiver := functionStats(env.Runner, "TallyFunction"), functionStats(env.Runner, "ArchiverFunction")
		return fmt.Sprintf("failed back %.0f, ledger retries %.0f, consumer %+v; stack's tally %d invocations %s, archiver %d invocations %s",
			metrics.get("VotesRetried"), metrics.get("LedgerRetries"), functionStats(r, "Consumer"),
			tally.Invocations, tally.Total.Round(time.Millisecond), archiver.Invocations, archiver.Total.Round(time.Millisecond))
	})
	stop()
	if err != nil {
		return runStats{}, fmt.Errorf("%s, %s: %w", c.label, fl.label, err)
	}
	first, last := timed.times()
	rs := runStats{consumer: c.label, flood: fl.label, n: n, total: total,
		took: counted.Sub(start), counting: counted.Sub(first), writing: last.Sub(first), caughtUp: counted.Sub(last),
		keys:       keyUnits(keysBefore, proxy.HotKeys(), poll),
		failedBack: metrics.get("VotesRetried"),
		sqs:        requests(),
	}
	if c.label == oursLabel {
		rs.tally = stackLog.waitTally(start, n)
	}
	consumerStats := functionStats(r, "Consumer")
	rs.invocations, rs.records, rs.handlerTime = consumerStats.Invocations, consumerStats.Records, consumerStats.Total
	tallyAfter := functionStats(env.Runner, "TallyFunction")
	rs.tally.invocations = tallyAfter.Invocations - tallyBefore.Invocations
	rs.tally.handlerTime = tallyAfter.Total - tallyBefore.Total
	return rs, nil
}

// waitCounted reads the poll's count every 100 ms until it shows n, and
// returns when it first did and the count it read then.
func waitCounted(ctx context.Context, c consumer, poll string, n int, progress func() string) (time.Time, int64, error) {
	start := time.Now()
	var got int64
	for time.Since(start) < 15*time.Minute {
		t, err := c.total(ctx, poll)
		if err == nil {
			got = t
		}
		if got >= int64(n) {
			return time.Now(), got, nil
		}
		if debugVotes && time.Since(start)%(5*time.Second) < 100*time.Millisecond {
			fmt.Fprintf(os.Stderr, "  %s %s: counted %d/%d, %s\n", c.label, time.Since(start).Round(time.Second), got, n, progress())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Time{}, got, fmt.Errorf("counted %d of %d after %s", got, n, time.Since(start).Round(time.Second))
}

func functionStats(r *runner.Runner, fn string) runner.Stats {
	for _, s := range r.Stats() {
		if s.Function == fn {
			return s
		}
	}
	return runner.Stats{}
}

// timedHandler notes when the consumer's first invocation started and its
// latest one ended.
type timedHandler struct {
	lambda.Handler
	first, last atomic.Int64
}

func (h *timedHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	h.first.CompareAndSwap(0, time.Now().UnixNano())
	out, err := h.Handler.Invoke(ctx, payload)
	end := time.Now().UnixNano()
	// Invocations end concurrently: keep the latest end.
	for old := h.last.Load(); end > old && !h.last.CompareAndSwap(old, end); old = h.last.Load() {
	}
	return out, err
}

func (h *timedHandler) times() (first, last time.Time) {
	return time.Unix(0, h.first.Load()), time.Unix(0, h.last.Load())
}

// keyFigures are the write units the DynamoDB proxy admitted (what AWS
// bills) on a run's keys, by kind, and the writes its key limit refused.
type keyFigures struct {
	ledger, counters, checkpoints float64
	throttled                     int64
}

// keyUnits attributes the units written between two snapshots of the
// proxy's keys: the poll's ledger keys (<poll>#<suffix>), its counter keys
// (count#<poll>#<shard>, or the naive consumer's naive#<poll>), and the
// tally's checkpoints (ckpt#<ledger table>), which every poll shares: a run
// is charged what they took while it ran.
func keyUnits(before, after []faultproxy.KeyStat, poll string) keyFigures {
	prev := map[[2]string]faultproxy.KeyStat{}
	for _, k := range before {
		prev[[2]string{k.Table, k.Key}] = k
	}
	var f keyFigures
	for _, k := range after {
		p := prev[[2]string{k.Table, k.Key}]
		units, throttled := k.AdmittedUnits-p.AdmittedUnits, k.Throttled-p.Throttled
		switch {
		case strings.HasPrefix(k.Key, poll+"#"):
			f.ledger += units
		case strings.HasPrefix(k.Key, "count#"+poll+"#"), k.Key == "naive#"+poll:
			f.counters += units
		case ledger.IsCheckpointPK(k.Key):
			f.checkpoints += units
		default:
			continue
		}
		f.throttled += throttled
	}
	return f
}

// sqsCounts are SQS requests on one queue, by kind.
type sqsCounts struct{ send, receive, delete, other int64 }

func (c sqsCounts) total() int64 { return c.send + c.receive + c.delete + c.other }

var (
	sqsObserved sync.Once
	sqsMu       sync.Mutex
	sqsByQueue  = map[string]*sqsCounts{} // by queue name
)

// queueRequests counts the SQS requests on the queue named name from now
// on (what the producer and the run's pollers send, empty receives
// included); the returned func reads the count.
func queueRequests(env *stack.Env, name string) func() sqsCounts {
	sqsObserved.Do(func() {
		env.Proxies[faultproxy.SQS].Observe(func(ex faultproxy.Exchange) {
			q := ex.Operation.QueueURL
			sqsMu.Lock()
			defer sqsMu.Unlock()
			c := sqsByQueue[q[strings.LastIndex(q, "/")+1:]]
			if c == nil {
				return
			}
			switch ex.Operation.Action {
			case "SendMessageBatch", "SendMessage":
				c.send++
			case "ReceiveMessage":
				c.receive++
			case "DeleteMessageBatch", "DeleteMessage":
				c.delete++
			default:
				c.other++
			}
		})
	})
	sqsMu.Lock()
	sqsByQueue[name] = &sqsCounts{}
	sqsMu.Unlock()
	return func() sqsCounts {
		sqsMu.Lock()
		defer sqsMu.Unlock()
		return *sqsByQueue[name]
	}
}

// emfSums adds up the metrics of the EMF lines written to it.
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

// stackLog is the stack's function log (stack.Options.FunctionLog): the
// tally runs in the stack, so its EMF lines are the only view of each
// batch's lag; warnings and errors of every function are kept too.
var stackLog = &functionLog{}

// functionLog keeps, from the JSON lines written to it, the tally's EMF
// lines and the warnings and errors, each with the time it was written.
type functionLog struct {
	mu       sync.Mutex
	tally    []tallyLine
	warnings []logLine
}

type tallyLine struct {
	at                                                time.Time
	counted, commits, moved, throttles, replayed, lag float64
	hasLag                                            bool
}

type logLine struct {
	at            time.Time
	function, msg string
}

func (l *functionLog) Write(p []byte) (int, error) {
	now := time.Now()
	for line := range strings.SplitSeq(string(p), "\n") {
		// Most lines are info logs: only parse the ones that matter.
		tally := strings.Contains(line, `"Function":"tally"`)
		warn := strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)
		if !tally && !warn {
			continue
		}
		var doc map[string]any
		if json.Unmarshal([]byte(line), &doc) != nil {
			continue
		}
		num := func(k string) float64 { f, _ := doc[k].(float64); return f }
		l.mu.Lock()
		if tally {
			lag, hasLag := doc["TallyLag"].(float64)
			l.tally = append(l.tally, tallyLine{at: now, counted: num("VotesCounted"), commits: num("TallyCommits"), moved: num("TallyCheckpointMoved"),
				throttles: num("Throttles"), replayed: num("TallyReplayed"), lag: lag, hasLag: hasLag})
		} else {
			fn, _ := doc["function"].(string)
			msg, _ := doc["msg"].(string)
			l.warnings = append(l.warnings, logLine{at: now, function: fn, msg: msg})
		}
		l.mu.Unlock()
	}
	return len(p), nil
}

// tallyFigures are the stack's tally's batches within a run.
type tallyFigures struct {
	batches                                      int
	counted, commits, moved, throttles, replayed float64
	lags                                         []float64 // TallyLag of each batch, seconds
	invocations                                  int
	handlerTime                                  time.Duration
}

func (l *functionLog) tallyBetween(from, to time.Time) tallyFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	var f tallyFigures
	for _, t := range l.tally {
		if t.at.Before(from) || t.at.After(to) {
			continue
		}
		f.batches++
		f.counted += t.counted
		f.commits += t.commits
		f.moved += t.moved
		f.throttles += t.throttles
		f.replayed += t.replayed
		if t.hasLag {
			f.lags = append(f.lags, t.lag)
		}
	}
	return f
}

// waitTally returns the tally's batches since from once they have counted
// n votes, or after 5 s: its EMF line comes just after the commit that a
// read of the counters may already have seen.
func (l *functionLog) waitTally(from time.Time, n int) tallyFigures {
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := l.tallyBetween(from, time.Now())
		if f.counted >= float64(n) || time.Now().After(deadline) {
			return f
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// warningsSince counts the warnings and errors logged since t, by
// function and message.
func (l *functionLog) warningsSince(t time.Time) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, w := range l.warnings {
		if !w.at.Before(t) {
			out[fmt.Sprintf("%s: %s", cmp.Or(w.function, "runner"), w.msg)]++
		}
	}
	return out
}

// percentile is the nearest-rank p-th percentile of xs (NaN for none).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[max(int(math.Ceil(p/100*float64(len(s))))-1, 0)]
}

// benchVotes: the same votes through the naive consumer and through
// ddbpipe, on the local stack at AWS's partition limit and at scaled
// limits; the staleness of the counters, the cost per million votes and
// the goals.
func benchVotes(ctx context.Context, env *stack.Env, scale float64) (*section, error) {
	since := time.Now()
	d, err := deployed(ctx, env)
	if err != nil {
		return nil, err
	}
	s := &section{title: "Votes: a naive counter against the ledger and its tally"}
	s.printf("Two consumers of the same votes, each on a queue of its own with the counter's mapping from template.yaml\n"+
		"(BatchSize %d, a %.0f s batching window, %d concurrent invocations, a %d s visibility timeout):\n\n"+
		"- **naive**: what public samples do, one UpdateItem ADD per vote on one item. It gets its best case: throttled writes\n"+
		"  are retried, up to 1 s apart, until they pass, so it never fails a message back to the queue.\n"+
		"- **ddbpipe**: the counter as deployed (`voteslambda.SetupCounter` with CounterFunction's environment and its %.0f s\n"+
		"  timeout), which writes each vote with one conditional PutItem (1 write unit) into its month's ledger, spread over\n"+
		"  %d partition keys per poll; the stack's own TallyFunction counts them from the ledger's stream into the poll's\n"+
		"  %d counter shards, with a checkpoint per stream shard, 2 units per item of each transaction. A vote is counted\n"+
		"  when `votes.Results` shows it.\n\n"+
		"\"End to end\" runs from the consumer's start to the first read (every 100 ms) that shows every vote; \"counting\"\n"+
		"from the first invocation's start, leaving out the wait for the first batch (the pollers split the queued flood and\n"+
		"each waits out its batching window for a batch that will not fill): a fixed cost of a finite flood that a continuous\n"+
		"one does not pay. Write units are the ones the DynamoDB proxy admitted (throttled requests are not billed): on the\n"+
		"poll's ledger keys, its counter keys, and the tally's checkpoint keys while the run lasted. A pass of %d votes\n"+
		"through each consumer, not reported, warms DynamoDB Local up first. The scaled runs, which the goals judge, come\n"+
		"next and the run at AWS's limit last: DynamoDB Local slows down as the ledger's stream grows (it keeps every record\n"+
		"24 h), so a later run may write slower than an earlier one for that alone (the consumer's write units/s column).\n\n",
		d.batch, d.window.Seconds(), d.concurrency, d.visibility, d.timeout.Seconds(), votes.LedgerSuffixes, d.shards, warmUpVotes)

	spread := flood{label: "ten-option spread", options: allOptions, seed: 1}
	// DynamoDB Local's JVM compiles its hot paths during the first thousands
	// of writes: a pass of each consumer, not reported, keeps that out of
	// the first measured run.
	for _, c := range []consumer{naive(env), ours(env, d)} {
		if _, err := runVotes(ctx, env, d, c, spread, warmUpVotes); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	// DynamoDB Local slows down as the ledger's stream grows (it keeps
	// records 24 h): the scaled runs, which the goals judge, go first.
	var sc *scaledRuns
	if scaledKeyLimit > 0 {
		if sc, err = runScaled(ctx, env, d, scale); err != nil {
			return nil, err
		}
	}
	atAWS, err := pair(ctx, env, d, spread, max(int(20000*scale), 1000))
	if err != nil {
		return nil, err
	}
	reportAtAWS(s, atAWS, spread)
	everyRun := atAWS[:]
	if sc != nil {
		scaledReport(s, sc, d)
		everyRun = append(everyRun, sc.runs()...)
	}
	var oursRuns []runStats
	for _, r := range everyRun {
		if r.consumer == oursLabel {
			oursRuns = append(oursRuns, r)
		}
	}
	staleness(s, oursRuns)
	local, awsPaced := votesCost(s, env, d, atAWS)
	votesGoals(s, oursRuns, local[1], awsPaced, sc)
	anomalies(s, since, everyRun)
	if err := objectsCost(ctx, s, env, scale); err != nil {
		return nil, err
	}
	return s, nil
}

// pair runs the naive consumer, then ddbpipe, on the same flood.
func pair(ctx context.Context, env *stack.Env, d deployment, fl flood, n int) ([2]runStats, error) {
	var p [2]runStats
	for i, c := range []consumer{naive(env), ours(env, d)} {
		rs, err := runVotes(ctx, env, d, c, fl, n)
		if err != nil {
			return p, err
		}
		p[i] = rs
	}
	return p, nil
}

// reportAtAWS writes the runs at AWS's 1,000 units per key (the naive
// run, then ddbpipe's).
func reportAtAWS(s *section, runs [2]runStats, fl flood) {
	L, n := awsKeyLimit(), runs[0].n
	s.printf("### At AWS's partition limit: %.0f write units per second per key\n\n"+
		"%d votes, %s, the proxy enforcing %.0f write units per second per partition key.\n\n", L, n, fl.label, L)
	runTable(s, runs[:])
	naiveRun, oursRun := runs[0], runs[1]
	s.printf("\nddbpipe end to end: **%.1f×** the naive consumer (counting: %.1f×).\n", oursRun.vps()/naiveRun.vps(), oursRun.cvps()/naiveRun.cvps())

	s.printf("\nWhat bounds each run on this machine (%d CPUs, shared by DynamoDB Local, the proxies and the stack's functions):\n\n"+
		"- the naive consumer %s;\n- ddbpipe's counter %s.\n", runtime.NumCPU(), bound(naiveRun, L), bound(oursRun, float64(votes.LedgerSuffixes)*L))
	if naiveRun.keys.throttled == 0 && oursRun.keys.throttled == 0 {
		s.printf("\nThe ratio is then the emulator's, not the partitions'.\n")
	}
	s.printf("\nOn AWS the bound is %.0f write units per second per partition key. The naive counter's one key allows %.0f votes/s.\n"+
		"ddbpipe's ledger spreads a poll over %d keys at 1 unit per put: %.0f votes/s per poll. The counters take about 2 units\n"+
		"per counter key per tally batch, one key per option in a batch (here %.2f counter units per vote at %.0f votes per\n"+
		"tally batch), so the poll's counter keys stay far under their bound. The scaled runs below measure the partitions.\n",
		L, L, votes.LedgerSuffixes, float64(votes.LedgerSuffixes)*L, oursRun.per(oursRun.keys.counters), oursRun.tally.votesPerBatch())
	s.charts = append(s.charts, unitsChart(runs))
}

// bound says what bound a run's writes: its keys' limit (ceiling units per
// second in all) when the proxy refused some of them, else DynamoDB Local.
func bound(r runStats, ceiling float64) string {
	if r.keys.throttled > 0 {
		return fmt.Sprintf("wrote %.0f units/s with %d writes refused by the key limit: its keys (%.0f units/s in all) bound it",
			r.writeRate(), r.keys.throttled, ceiling)
	}
	return fmt.Sprintf("wrote %.0f units/s with no write refused, under the %.0f units/s its keys allow: the emulator bound it",
		r.writeRate(), ceiling)
}

// votesPerBatch is the votes counted per tally batch.
func (t tallyFigures) votesPerBatch() float64 { return t.counted / float64(max(t.batches, 1)) }

// runColumns are the columns of a run: speed, units per vote by kind,
// what was throttled, failed back or delivered again, and how long the
// counters took to catch up.
const runColumns = "votes/s end to end | votes/s counting | end to end | counting | consumer's write units/s, first invocation to last | " +
	"write units per vote: ledger + counters + checkpoints = total | writes refused by the key limit | " +
	"messages failed back | messages delivered again | tally batches (votes per batch) | caught up after the last vote"

func runCells(r runStats) string {
	failed, batches := "–", "–" // the naive consumer has no tally and fails nothing back
	if r.consumer == oursLabel {
		failed = fmt.Sprintf("%.0f", r.failedBack)
		batches = fmt.Sprintf("%d (%.0f)", r.tally.batches, r.tally.votesPerBatch())
	}
	return fmt.Sprintf("%.0f | %.0f | %s | %s | %.0f | %.3f + %.3f + %.3f = **%.3f** | %d | %s | %d | %s | %s",
		r.vps(), r.cvps(), r.took.Round(100*time.Millisecond), r.counting.Round(100*time.Millisecond), r.writeRate(),
		r.per(r.keys.ledger), r.per(r.keys.counters), r.per(r.keys.checkpoints), r.unitsPerVote(),
		r.keys.throttled, failed, r.redelivered(), batches, r.caughtUp.Round(10*time.Millisecond))
}

func runTable(s *section, runs []runStats) {
	s.printf("| consumer | %s |\n|---|%s\n", runColumns, strings.Repeat("---:|", 11))
	for _, r := range runs {
		s.printf("| %s | %s |\n", r.consumer, runCells(r))
	}
}

// unitsChart draws the write units per vote of each consumer, by kind.
func unitsChart(runs [2]runStats) pngchart.Chart {
	c := pngchart.Chart{Title: "write units per vote, ten-option spread at AWS's limit", Unit: "units"}
	c.Bars = append(c.Bars, pngchart.Bar{Label: "naive: its counter", Value: runs[0].unitsPerVote()})
	o := runs[1]
	c.Bars = append(c.Bars,
		pngchart.Bar{Label: "ddbpipe: ledger", Value: o.per(o.keys.ledger)},
		pngchart.Bar{Label: "ddbpipe: counters", Value: o.per(o.keys.counters)},
		pngchart.Bar{Label: "ddbpipe: checkpoints", Value: o.per(o.keys.checkpoints)},
		pngchart.Bar{Label: "ddbpipe: total", Value: o.unitsPerVote()})
	return c
}

// scaledRuns are the runs at scaledKeyLimit: pairs (naive, ddbpipe) of
// the hot flood, then one pair of the spread.
type scaledRuns struct {
	limit  float64
	n      int
	hot    [][2]runStats
	spread [2]runStats
}

func (sc *scaledRuns) runs() []runStats {
	var out []runStats
	for _, p := range sc.hot {
		out = append(out, p[:]...)
	}
	return append(out, sc.spread[:]...)
}

func ratio(p [2]runStats) float64         { return p[1].vps() / p[0].vps() }
func countingRatio(p [2]runStats) float64 { return p[1].cvps() / p[0].cvps() }

// runScaled runs the two consumers on a hot flood (every vote for one
// option) goalHotRuns times and on the spread once, with the proxy's
// per-key write limit scaled down to scaledKeyLimit, so that the
// partitions, not DynamoDB Local's own speed, bound them.
func runScaled(ctx context.Context, env *stack.Env, d deployment, scale float64) (*scaledRuns, error) {
	proxy := env.Proxies[faultproxy.DynamoDB]
	prev := proxy.KeyWriteLimit()
	if err := proxy.SetKeyWriteLimit(scaledKeyLimit); err != nil {
		return nil, err
	}
	defer func() { _ = proxy.SetKeyWriteLimit(prev) }()

	sc := &scaledRuns{limit: scaledKeyLimit, n: max(int(4000*scale), 1000)}
	hot := flood{label: "one hot option", options: []string{"o0"}, seed: 2}
	spread := flood{label: "ten-option spread", options: allOptions, seed: 3}
	for range goalHotRuns {
		p, err := pair(ctx, env, d, hot, sc.n)
		if err != nil {
			return nil, fmt.Errorf("scaled: %w", err)
		}
		sc.hot = append(sc.hot, p)
	}
	var err error
	if sc.spread, err = pair(ctx, env, d, spread, sc.n); err != nil {
		return nil, fmt.Errorf("scaled: %w", err)
	}
	return sc, nil
}

// scaledReport writes the scaled runs: the model, each run, the ratios.
func scaledReport(s *section, sc *scaledRuns, d deployment) {
	L, n := sc.limit, sc.n
	ledgerCeiling := float64(votes.LedgerSuffixes) * L
	s.printf("\n### At scaled partition limits: %.0f write units per second per key\n\n", L)
	s.printf("The proxy's limit is scaled down %.0f× to %.0f write units per second per partition key (`-key-limit`,\n"+
		"`make bench KEY_LIMIT=…`): the naive counter's one item then allows %.0f votes/s, ddbpipe's ledger %.0f votes/s\n"+
		"(%d keys × %.0f units, 1 unit per put). ", awsKeyLimit()/L, L, L, ledgerCeiling, votes.LedgerSuffixes, L)
	s.printf("Each flood is %d votes (the same voters and options for both consumers), queued first. The hot flood\n"+
		"(every vote for one option) runs %d times, each a naive run then a ddbpipe run; the spread once.\n\n", n, len(sc.hot))
	s.printf("| flood | run | consumer | %s |\n|---|---:|---|%s\n", runColumns, strings.Repeat("---:|", 11))
	row := func(label string, i int, r runStats) {
		s.printf("| %s | %d | %s | %s |\n", label, i, r.consumer, runCells(r))
	}
	for i, p := range sc.hot {
		row("one hot option", i+1, p[0])
		row("one hot option", i+1, p[1])
	}
	row("ten-option spread", 1, sc.spread[0])
	row("ten-option spread", 1, sc.spread[1])

	// The end-to-end ceiling at this n: both pay the batching window; the
	// naive consumer then writes at L, ddbpipe at the ledger's ceiling, each
	// key's bucket starting full (one second of its limit).
	w := d.window.Seconds()
	naiveBest := w + (float64(n)-L)/L
	oursBest := w + max(float64(n)-ledgerCeiling, 0)/ledgerCeiling
	scaledBounds(s, sc, ledgerCeiling)
	s.printf("\n| flood | run | ddbpipe ÷ naive, end to end | counting | messages failed back by ddbpipe |\n|---|---:|---:|---:|---:|\n")
	// The chart's font is ASCII only.
	ratios := pngchart.Chart{Title: fmt.Sprintf("ddbpipe / naive at %.0f write units/s per key, end to end", L), Unit: "x"}
	for i, p := range sc.hot {
		s.printf("| one hot option | %d | **%.1f×** | %.1f× | %.0f |\n", i+1, ratio(p), countingRatio(p), p[1].failedBack)
		ratios.Bars = append(ratios.Bars, pngchart.Bar{Label: fmt.Sprintf("hot option, run %d", i+1), Value: ratio(p)})
	}
	s.printf("| ten-option spread | 1 | **%.1f×** | %.1f× | %.0f |\n", ratio(sc.spread), countingRatio(sc.spread), sc.spread[1].failedBack)
	ratios.Bars = append(ratios.Bars, pngchart.Bar{Label: "ten-option spread", Value: ratio(sc.spread)})
	s.printf("\nThe partitions' ratio is %.0f× (%d ledger keys against one counter item). End to end over %d votes it cannot\n"+
		"exceed about %.1f×: both consumers first wait out the %.0f s batching window, then the naive one needs about %.1f s\n"+
		"at %.0f votes/s (its key's first second is free) and ddbpipe about %.1f s at %.0f, before the tally's lag; the\n"+
		"counting ratio leaves the window out.\n",
		ledgerCeiling/L, votes.LedgerSuffixes, n, naiveBest/oursBest, w, naiveBest-w, L, oursBest-w, ledgerCeiling)
	s.printf("\nWhat would differ on AWS: every rate ×%.0f, so the fixed costs (the first batching window, the tally's batching\n"+
		"window) weigh that much less against the writing; a new on-demand table (each month's ledger is one) serves about\n"+
		"4,000 write units per second until DynamoDB has scaled it (or it is pre-warmed with warm throughput); and a poll's\n"+
		"ledger keys may share a physical partition until DynamoDB splits it for heat, which this per-key model does not show.\n",
		awsKeyLimit()/L)
	rates := pngchart.Chart{Title: fmt.Sprintf("votes/s end to end at %.0f write units/s per key", L), Unit: "votes/s"}
	for i, p := range sc.hot {
		rates.Bars = append(rates.Bars,
			pngchart.Bar{Label: fmt.Sprintf("hot, run %d: naive", i+1), Value: p[0].vps()},
			pngchart.Bar{Label: fmt.Sprintf("hot, run %d: ddbpipe", i+1), Value: p[1].vps()})
	}
	rates.Bars = append(rates.Bars,
		pngchart.Bar{Label: "spread: naive", Value: sc.spread[0].vps()},
		pngchart.Bar{Label: "spread: ddbpipe", Value: sc.spread[1].vps()})
	s.charts = append(s.charts, rates, ratios)
}

// scaledBounds says, from the writes the key limit refused, which scaled
// runs their keys bound and at what pace the others wrote.
func scaledBounds(s *section, sc *scaledRuns, ledgerCeiling float64) {
	var naiveBound, naiveRuns, oursBound, oursRuns int
	var free []float64 // ddbpipe's write rates in runs its keys did not bind
	for _, r := range sc.runs() {
		switch {
		case r.consumer == naiveLabel:
			naiveRuns++
			if r.keys.throttled > 0 {
				naiveBound++
			}
		case r.consumer == oursLabel:
			oursRuns++
			if r.keys.throttled > 0 {
				oursBound++
			} else {
				free = append(free, r.writeRate())
			}
		}
	}
	s.printf("\nThe key limit refused the naive consumer's writes in %d of its %d runs, ddbpipe's in %d of its %d.", naiveBound, naiveRuns, oursBound, oursRuns)
	if len(free) > 0 {
		s.printf(" Where it refused none of ddbpipe's, the emulator bound it: its ledger took %.0f to %.0f units/s, under the\n"+
			"%.0f its keys allow (each key's bucket starts full, one second of its limit, so a short flood may never drain it).",
			slices.Min(free), slices.Max(free), ledgerCeiling)
	}
	s.printf("\n")
}

// staleness writes how far ddbpipe's counters trail its ledger: the
// tally's own lag per batch and, per run, the time from the last vote
// written to the first read showing every vote.
func staleness(s *section, runs []runStats) {
	var lags, caught []float64
	var t tallyFigures
	written := 0
	for _, r := range runs {
		written += r.n
		lags = append(lags, r.tally.lags...)
		caught = append(caught, r.caughtUp.Seconds())
		t.batches += r.tally.batches
		t.counted += r.tally.counted
		t.commits += r.tally.commits
		t.moved += r.tally.moved
		t.throttles += r.tally.throttles
		t.replayed += r.tally.replayed
	}
	s.printf("\n### Staleness of the counters\n\n"+
		"Votes are written to the ledger first and counted by the tally from its stream. Over ddbpipe's %d runs above:\n\n"+
		"| measure | samples | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n", len(runs))
	s.printf("| TallyLag (the tally's EMF, per batch: the newest vote's ledger write to its commit) | %d batches | %.2f s | %.2f s | %.2f s |\n",
		len(lags), percentile(lags, 50), percentile(lags, 99), percentile(lags, 100))
	s.printf("| caught up: the counter's last invocation's end to the first `votes.Results` read showing every vote | %d runs | %.2f s | %.2f s | %.2f s |\n\n",
		len(caught), percentile(caught, 50), percentile(caught, 99), percentile(caught, 100))
	s.printf("TallyLag is the lag of the newest vote of each commit: a batch's earliest votes waited up to the tally's batching\n" +
		"window longer. The caught-up time is read every 100 ms, so it is up to 0.1 s late; with few runs, p99 is their maximum.\n")
	s.printf("\nThe tally's EMF over those runs: %d batches counted %.0f votes (the runs wrote %d) in %.0f commits; %.0f commits\n"+
		"found their checkpoint moved, %.0f were throttled, and %.0f records delivered again were skipped as counted already.\n",
		t.batches, t.counted, written, t.commits, t.moved, t.throttles, t.replayed)
}

// votesGoals writes the goals with the measured figures.
func votesGoals(s *section, runs []runStats, cost usdPerMillion, awsPaced [2]usdPerMillion, sc *scaledRuns) {
	worstUnits := 0.0
	for _, r := range runs {
		worstUnits = max(worstUnits, r.unitsPerVote())
	}
	var caught []float64
	for _, r := range runs {
		caught = append(caught, r.caughtUp.Seconds())
	}
	p99 := percentile(caught, 99)
	s.printf("\n### Goals\n\n| goal | measured | verdict |\n|---|---|---|\n")
	s.printf("| write units per vote (ledger + counters + checkpoints) ≤ %.1f | %.3f at most, over ddbpipe's %d runs | %s |\n",
		goalUnitsPerVote, worstUnits, len(runs), verdict(worstUnits <= goalUnitsPerVote))
	s.printf("| ≤ $%.2f per million votes | $%.3f modelled (DynamoDB $%.3f + SQS $%.3f + Lambda $%.3f at DynamoDB Local's pace), ten-option spread at AWS's limit | %s |\n",
		goalUSDPerMillion, cost.total(), cost.dynamodb, cost.sqs, cost.lambda, verdict(cost.total() <= goalUSDPerMillion))
	costRatio := awsPaced[1].total() / awsPaced[0].total()
	s.printf("| cost per million votes ≤ %.2f × the naive consumer's, Lambda at AWS's latencies | %.2f× ($%.3f against $%.3f) | %s |\n",
		goalCostRatio, costRatio, awsPaced[1].total(), awsPaced[0].total(), verdict(costRatio <= goalCostRatio))
	switch {
	case sc == nil:
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | not measured (`-key-limit 0`) | – |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns)
	case sc.limit != goalHotKeyLimit:
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | not measured at %d (ran at %.0f) | – |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns, goalHotKeyLimit, sc.limit)
	default:
		minRatio, failed := math.Inf(1), 0.0
		var each []string
		for _, p := range sc.hot {
			minRatio = min(minRatio, ratio(p))
			failed += p[1].failedBack
			each = append(each, fmt.Sprintf("%.1f×", ratio(p)))
		}
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | %s (lowest %.1f×); %.0f messages failed back in all | %s |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns, strings.Join(each, ", "), minRatio, failed, verdict(minRatio >= goalHotRatio && failed == 0))
	}
	s.printf("| counters caught up ≤ %.0f s (p99) after the last vote | p99 %.2f s over %d runs | %s |\n",
		goalCaughtUp, p99, len(caught), verdict(p99 <= goalCaughtUp))
	if cost.total() > goalUSDPerMillion && cost.dynamodb+cost.sqs <= goalUSDPerMillion {
		s.printf("\nThe cost goal fails on Lambda's share, which here is the emulator's queueing (see the cost): DynamoDB and SQS,\n"+
			"what AWS bills for the requests counted, come to $%.3f of the $%.2f.\n", cost.dynamodb+cost.sqs, goalUSDPerMillion)
	}
	if sc != nil && sc.limit == goalHotKeyLimit {
		hotShortfall(s, sc)
	}
}

// hotShortfall says, when the hot flood's ratio falls short of the goal,
// what the goal would take in these runs: ddbpipe end to end in a
// goalHotRatio-th of the naive consumer's time, the batching window
// included, and a ledger at goalHotRatio × the key limit.
func hotShortfall(s *section, sc *scaledRuns) {
	var naiveTook, oursTook time.Duration
	var fastest float64
	var refused int64
	for _, p := range sc.hot {
		naiveTook += p[0].took
		oursTook += p[1].took
		fastest = max(fastest, p[1].writeRate())
		refused += p[1].keys.throttled
	}
	runs := time.Duration(len(sc.hot))
	naiveTook, oursTook = naiveTook/runs, oursTook/runs
	if float64(naiveTook)/float64(oursTook) >= goalHotRatio {
		return
	}
	s.printf("\nThe hot flood's goal would take ddbpipe %s end to end here (the naive consumer's %s ÷ %.0f), against %s on\n"+
		"average, the counter's batching window included; and a ledger written at %.0f × %.0f = %.0f units/s, against at most\n"+
		"%.0f units/s in these runs",
		(naiveTook / time.Duration(goalHotRatio)).Round(100*time.Millisecond), naiveTook.Round(100*time.Millisecond), goalHotRatio,
		oursTook.Round(100*time.Millisecond), goalHotRatio, sc.limit, goalHotRatio*sc.limit, fastest)
	if refused == 0 {
		s.printf(", where no key refused a write: this machine's DynamoDB Local, not the partitions, falls short.\n")
	} else {
		s.printf(", with %d writes refused by the key limit.\n", refused)
	}
}

// anomalies writes what a healthy run shows none of: a count above the
// votes sent (a vote counted twice), and warnings or errors the stack's
// functions logged while the section ran.
func anomalies(s *section, since time.Time, runs []runStats) {
	exact := true
	for _, r := range runs {
		if r.total != int64(r.n) {
			exact = false
			s.printf("\n**%s (%s, %d votes) counted %d.**\n", r.consumer, r.flood, r.n, r.total)
		}
	}
	if exact {
		s.printf("\nEvery run counted exactly the votes it sent.\n")
	}
	w := stackLog.warningsSince(since)
	if len(w) == 0 {
		s.printf("\nThe stack's functions logged no warning or error during these runs.\n")
		return
	}
	s.printf("\nThe stack's functions logged these warnings and errors during these runs:\n\n| function: message | times |\n|---|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(w)) {
		s.printf("| %s | %d |\n", k, w[k])
	}
}
