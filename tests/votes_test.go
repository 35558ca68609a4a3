package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// ledgerStream is the stream of this month's ledger table.
func ledgerStream(t *testing.T, env *stack.Env) string {
	t.Helper()
	out, err := env.Clients.DynamoDB.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{
		TableName: aws.String(ledger.TableName(env.Vars["LEDGER_TABLE_PREFIX"], ledger.MonthOf(time.Now()))),
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Table.LatestStreamArn)
}

// createPoll creates a poll through the HTTP API.
func createPoll(t *testing.T, env *stack.Env, body string) {
	t.Helper()
	resp, err := checkedAPI(t, env).Post(env.Vars["API_URL"]+"/polls", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("POST /polls = %d %s", resp.StatusCode, b.String())
	}
}

type results struct {
	PollID   string           `json:"pollId"`
	Totals   map[string]int64 `json:"totals"`
	Total    int64            `json:"total"`
	Rejected map[string]int64 `json:"rejected"`
}

// getResults reads a poll's results through the HTTP API, retrying a 503
// (DynamoDB throttled the read), as a client of the API should.
func getResults(t *testing.T, env *stack.Env, poll string) results {
	t.Helper()
	for attempt := 1; ; attempt++ {
		resp, err := checkedAPI(t, env).Get(env.Vars["API_URL"] + "/polls/" + poll + "/results?maxAge=0")
		if err != nil {
			t.Fatal(err)
		}
		var r results
		status := resp.StatusCode
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if status == http.StatusServiceUnavailable && attempt < 5 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if status != 200 || err != nil {
			t.Fatalf("GET results = %d (%v)", status, err)
		}
		return r
	}
}

// queueDepth is the visible plus in-flight messages of a queue.
func queueDepth(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	visible, inFlight, err := votessqs.Depth(context.Background(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return visible + inFlight
}

// The proof of the votes flow: distinct votes plus 10 % re-sent, written
// once to the ledger and counted by the tally while DynamoDB throttles,
// the runner delivers batches twice, handlers crash mid-batch and the
// stream's shards split. The totals equal the distinct votes exactly,
// option by option, and the counter writes are spread over the shards.
// make test sends 1,000 votes (every fault still happens, and 4 shards
// split twice); make soak sends 3,000 (stacktest.SoakVar).
func TestVotesExactlyOnceUnderFaults(t *testing.T) {
	t.Parallel() // waits on the pipeline: see TestMain
	// As on AWS: the ledger's stream in 4 shards that split after n/12
	// records (up to 16 shards by the end: 4 × 2²), one tally per shard at once,
	// and transactions that overlap cancelled with TransactionConflict.
	// The same proof at size (20,000 votes and more, 16 shards) runs in
	// the bench (votes-shards) and in make soak.
	n := 1000
	if stacktest.Soak() {
		n = 3000
	}
	// The queue's timings are the template's defaults divided by twelve (the
	// counter's 60 s to 5 s, the visibility's 360 s to 30 s) and its
	// deliveries multiplied by twelve (20 to 240): 240 × 30 s last two hours,
	// as 20 × 360 s do, past the hour a vote given back must stay
	// deliverable (votes.RetryBudget). With 20 of 30 s, the counter
	// would stretch every give-back to the full 30 s to keep that hour,
	// and a vote it did not reach under the gate's load would wait that
	// long instead of the second or two the store needs to reach it.
	env := upLocalOn(t, stacktest.Need(t), map[string]string{
		"CounterTimeoutSeconds": "5", "VotesVisibilityTimeoutSeconds": "30", "VotesMaxReceiveCount": "240",
		"CounterShards": "8", "CounterBatchSize": "250", "CounterBatchingWindowSeconds": "1",
	}, 0, func(o *stack.Options) { o.StreamShards, o.StreamSplitAfter, o.Conflicts = 4, n/12, true })
	ctx := context.Background()
	options := []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"}
	createPoll(t, env, `{"pollId":"big","options":["o0","o1","o2","o3","o4","o5","o6","o7","o8","o9"],"shards":8}`)

	// Faults: throttling on DynamoDB (the SDK and the counter retry),
	// duplicate deliveries, and a forced crash mid-batch before anything else.
	env.Proxies[faultproxy.DynamoDB].SetFaults(faultproxy.Faults{ThrottleRate: 0.03})
	env.Runner.SetFaults(runner.Faults{CrashNext: 1, DuplicateRate: 0.1, Only: "CounterFunction"})

	sqsc := env.Clients.SQS
	producer := votessqs.NewProducer(sqsc, env.Vars["VOTES_QUEUE_URL"])
	load, err := votesload.Run(ctx, producer, votesload.Options{PollID: "big", Options: options, Count: n, DupRate: 0.1, Concurrency: 8, Seed: 42})
	if err != nil || load.Failed > 0 || load.Sent != n || load.Duplicates != n/10 {
		t.Fatalf("load: %v %+v", err, load)
	}
	// Nothing in flight: every message deleted (none visible or received)
	// and no counter invocation running, not even a slow first delivery of
	// a message whose redelivery was already deleted. Then the total is final.
	eventually(t, 8*time.Minute, "every vote counted, the queue drained and no invocation running", func() bool {
		return getResults(t, env, "big").Total >= int64(n) && queueDepth(t, sqsc, env.Vars["VOTES_QUEUE_URL"]) == 0 &&
			inFlight(env.Runner, "CounterFunction") == 0
	})
	got := getResults(t, env, "big")
	if got.Total != int64(n) {
		t.Errorf("total %d, want exactly %d", got.Total, n)
	}
	for o, want := range load.PerOption {
		if got.Totals[o] != int64(want) {
			t.Errorf("option %s: %d, want %d", o, got.Totals[o], want)
		}
	}
	for _, q := range []string{"VOTES_REJECTS_QUEUE_URL", "VOTES_DEAD_LETTER_QUEUE_URL"} {
		if n := queueDepth(t, sqsc, env.Vars[q]); n != 0 {
			t.Errorf("%s holds %d messages, want none", q, n)
		}
	}
	var stats runner.Stats
	for _, s := range env.Runner.Stats() {
		if s.Function == "CounterFunction" {
			stats = s
		}
	}
	if st := env.Proxies[faultproxy.DynamoDB].Stats(); st.Throttled == 0 || stats.Crashes == 0 {
		t.Errorf("faults did not happen: %d throttles, %d crashes", st.Throttled, stats.Crashes)
	}
	ddb := env.Proxies[faultproxy.DynamoDB].Stats()
	t.Logf("counter: %d invocations, %d records, %d crashes, %d duplicate deliveries; DynamoDB throttles %d, transaction conflicts %d of %d transactions",
		stats.Invocations, stats.Records, stats.Crashes, stats.Duplicates, ddb.Throttled, ddb.ByAction["TransactWriteItems"].Conflicts, ddb.ByAction["TransactWriteItems"].Requests)
	shards, err := env.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(ledgerStream(t, env))})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(shards.StreamDescription.Shards); got <= 4 {
		t.Errorf("the ledger's stream has %d shards after %d records, want splits past 4", got, n)
	}

	// Spread: no shard key takes more than 3/N of the poll's counter
	// writes. Each tally moves to the next key each second, so a key's
	// share depends on how many seconds the run counts: 0.160 and 0.220
	// of them (1/8 = 0.125) over the 10 s or so of this one, 0.144 and
	// 0.170 over twice as many votes. Writes that collapse onto two keys
	// or fewer take 0.5 and more.
	writes := map[string]int64{}
	var total int64
	for _, k := range env.Proxies[faultproxy.DynamoDB].HotKeys() {
		if strings.HasPrefix(k.Key, "count#big#") {
			writes[k.Key] += k.Writes
			total += k.Writes
		}
	}
	// Which keys a run writes depends on the seconds its commits fall in:
	// a busy make test once counted everything in few enough of them to
	// miss one of the 8 (TestStreamPickSeparatesConcurrentTallies, in
	// shared/votes, proves each tally visits every key over 8 periods).
	if len(writes) < 5 {
		t.Errorf("counter writes on %d shard keys, want 5 of 8 at least: %v", len(writes), writes)
	}
	top := 0.0
	for k, n := range writes {
		share := float64(n) / float64(total)
		top = max(top, share)
		if share > 3.0/8 {
			t.Errorf("%s took %.3f of %d counter writes, above 3/8", k, share, total)
		}
	}
	t.Logf("the busiest counter shard key took %.3f of %d counter writes (1/8 = 0.125)", top, total)
}
