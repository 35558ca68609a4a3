package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

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
	poll, url, requests, err := floodQueue(ctx, env, d, c, fl, n)
	if err != nil {
		return runStats{}, err
	}
	var metrics emfSums
	r, timed, err := consumerRunner(ctx, env, d, c, poll, url, &metrics)
	if err != nil {
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

// floodQueue creates a poll and a queue of its own, counts the queue's
// requests from then on, and sends n votes of fl into it.
func floodQueue(ctx context.Context, env *stack.Env, d deployment, c consumer, fl flood, n int) (poll, url string, requests func() sqsCounts, err error) {
	poll = fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	store := votesddb.New(env.Clients.DynamoDB, env.Vars["COUNTERS_TABLE_NAME"], env.Vars["LEDGER_TABLE_PREFIX"])
	if err := store.CreatePoll(ctx, votes.Poll{ID: poll, Options: allOptions, Shards: d.shards}); err != nil {
		return "", "", nil, err
	}
	q, err := env.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(poll),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(d.visibility)}})
	if err != nil {
		return "", "", nil, err
	}
	url = aws.ToString(q.QueueUrl)
	requests = queueRequests(env, poll)
	load, err := votesload.Run(ctx, votessqs.NewProducer(env.Clients.SQS, url), votesload.Options{PollID: poll, Options: fl.options, Count: n, Concurrency: 8, Seed: fl.seed})
	if err != nil || load.Failed > 0 {
		return "", "", nil, fmt.Errorf("%s: load: %v (%d failed)", c.label, err, load.Failed)
	}
	return poll, url, requests, nil
}

// consumerRunner is a runner of its own with the consumer on the queue at
// url, mapped as the template maps the counter; timed notes its first and
// last invocations.
func consumerRunner(ctx context.Context, env *stack.Env, d deployment, c consumer, poll, url string, metrics *emfSums) (*runner.Runner, *timedHandler, error) {
	h, err := c.handler(ctx, poll, url, metrics)
	if err != nil {
		return nil, nil, err
	}
	r := runner.New()
	timed := &timedHandler{Handler: lambda.NewHandler(h)}
	if err := r.AddFunction(runner.Function{LogicalID: "Consumer", Timeout: c.timeout, Handler: timed}); err != nil {
		return nil, nil, err
	}
	if _, err := r.AddSQS(env.Clients.SQS, runner.SQSMapping{Function: "Consumer", QueueURL: url, BatchSize: d.batch, Window: d.window,
		ReportBatchItemFailures: true, MaxConcurrency: d.concurrency, WaitTime: time.Second}); err != nil {
		return nil, nil, err
	}
	return r, timed, nil
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
