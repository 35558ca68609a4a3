package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

func TestMain(m *testing.M) {
	stacktest.Main(m)
}

// prebuilt are the functions the soaks run as processes, built once for
// every test of the package.
var prebuilt struct {
	once sync.Once
	bins map[string]string
	err  error
}

// The soak starts servers of its own (it restarts one); the tests run it
// the way `make soak` does, shorter.
func soakConfig(t *testing.T, c Config) Config {
	t.Helper()
	stacktest.Need(t) // skips, or fails under DDBPIPE_REQUIRE_STACK, as the other integration tests do
	root, err := servers.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	c.Root, c.Progress = root, testWriter{t}
	prebuilt.once.Do(func() {
		prebuilt.bins, prebuilt.err = buildFunctions(t.Context(), root, killable)
	})
	if prebuilt.err != nil {
		t.Fatal(prebuilt.err)
	}
	c.Binaries = prebuilt.bins
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func invariant(res *Result, prefix string) (Invariant, bool) {
	for _, i := range res.Invariants {
		if strings.HasPrefix(i.Name, prefix) {
			return i, true
		}
	}
	return Invariant{}, false
}

// A short soak with every fault: every invariant holds, and the faults did
// happen (kills mid-invocation, proxy errors, the S3 restart, the cold
// month's retirement under load), so the run proves something.
func TestSoakHoldsUnderFaults(t *testing.T) {
	stacktest.SoakOnly(t, "TestSoakCatchesATallyThatIgnoresItsCheckpoint, the soak's checks on the shared servers, and tests/'s exactly-once proof under faults")
	// The votes sized from the store's ceiling, as make soak sizes them:
	// a steady part, and one burst above the ceiling.
	c := soakConfig(t, Config{Duration: 30 * time.Second, SteadyShare: 0.05, BurstShare: 1.5, Bursts: 1, BurstFor: time.Second, Faults: true, DuplicateRate: 0.2,
		KillEvery: 3 * time.Second, PhaseEvery: 3 * time.Second, LeakBurst: 6 * time.Second, Seed: 7,
		// Four shards, no splits: a split during the leak check's bursts
		// adds a reader per new shard, which that check would count as a
		// leak. TestVotesExactlyOnceUnderFaults (tests/) proves splits.
		StreamShards: 4, Conflicts: true})
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.Write(dir, res.Load.objectsPerSec, ""); err != nil {
		t.Fatal(err)
	}
	for _, i := range res.Invariants {
		if !i.OK {
			t.Errorf("invariant broken: %s: %s", i.Name, i.Figures)
		}
	}
	if len(res.Invariants) < 11 {
		t.Errorf("%d invariants checked, want 11", len(res.Invariants))
	}
	f := res.Faults
	kills := 0
	for _, n := range f.Kills {
		kills += n
	}
	var proxied int64
	for _, c := range f.Proxy {
		proxied += c.Throttled + c.ServerErrors + c.Dropped
	}
	if kills < 4 || f.KillsBusy == 0 || proxied == 0 || f.S3Down == 0 || f.Duplicates == 0 {
		t.Errorf("faults: %d kills (%d mid-invocation), %d proxy errors, S3 down %s, %d duplicated batches; want some of each", kills, f.KillsBusy, proxied, f.S3Down, f.Duplicates)
	}
	retired := false
	for _, r := range res.Rotations {
		retired = retired || len(r.Retired) > 0 && r.At < res.LoadEnded.Sub(res.Began)
	}
	if !retired {
		t.Error("no rotator run started under load retired the cold month")
	}
	if z := res.Sizing; z.Ceiling <= 0 || z.Writers == 0 || z.Steady != max(1, 0.05*z.Ceiling) || z.Burst != c.BurstShare*z.Ceiling {
		t.Errorf("sizing %+v: want the ceiling measured, the steady rate 0.05 of it and the burst %g of it", z, c.BurstShare)
	}
	if !bursted(res) {
		t.Error("no burst of votes in the load")
	}
	// The sized load ran: at least half its steady part was sent. (The
	// burst's share depends on how fast this machine's producer sends:
	// a busy make test sent 448 of 603 votes due, burst included.)
	if steady := res.Sizing.Steady * c.Duration.Seconds(); float64(res.Load.VotesSent+res.Load.Bad) < 0.5*steady ||
		res.Load.Bad == 0 || res.Load.ObjectOps["get verified"] == 0 ||
		res.Load.ObjectOps["shared put ok"] == 0 || res.Load.ObjectOps["shared delete ok"] == 0 {
		t.Errorf("load: %+v", res.Load)
	}
	for _, name := range []string{"report.md", "timeline.png"} {
		if st, err := os.Stat(dir + "/" + name); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func bursted(res *Result) bool {
	for _, e := range res.Faults.Events {
		if e.Kind == "burst" {
			return true
		}
	}
	return false
}

// The soak catches a tally that ignores its checkpoint: under redelivered
// stream batches it counts votes twice, and the vote invariant says so
// with the figures. Every batch is delivered twice, through the drain
// too, so the run cannot miss the redelivery by chance (a share of 0.3
// once left a short run with no tally batch delivered twice; a slow
// machine's counter once wrote every vote after the load, when the
// redeliveries stopped). No other fault: it runs on the shared servers.
func TestSoakCatchesATallyThatIgnoresItsCheckpoint(t *testing.T) {
	c := soakConfig(t, Config{Duration: 8 * time.Second, VotesPerSecond: 60, Setups: map[string]lambdafn.Setup{"TallyFunction": forgetfulTally},
		Servers: stacktest.Need(t), StackName: fmt.Sprintf("soakcp%d", time.Now().UnixNano()%1e6),
		DuplicateRate: 1, NoLeakCheck: true, Seed: 11})
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	i, ok := invariant(res, "vote totals")
	if !ok {
		t.Fatal("no vote invariant")
	}
	if i.OK {
		t.Errorf("the vote invariant holds for a tally that ignores its checkpoint: %s", i.Figures)
	}
	t.Logf("caught: %s", i.Figures)
}

// forgetfulTally is the tally function with a store that always reads an
// empty checkpoint, and commits over whatever checkpoint is there: a
// redelivered batch is counted again.
func forgetfulTally(_ context.Context, env lambdafn.Env) (any, error) {
	store := votesddb.New(awsenv.DynamoDB(env.AWS), env.Getenv("COUNTERS_TABLE"), env.Getenv("LEDGER_TABLE_PREFIX"))
	tally := &votes.Tally{Store: forgetful{store}, Log: env.Log}
	h := &voteslambda.Stream{Tally: tally, Log: env.Log}
	return h.Handle, nil
}

type forgetful struct{ *votesddb.Votes }

func (forgetful) Checkpoint(context.Context, votes.StreamShard) (string, error) { return "", nil }

func (f forgetful) CommitTally(ctx context.Context, s votes.StreamShard, _ string, c votes.TallyCommit) error {
	cur, err := f.Votes.Checkpoint(ctx, s)
	if err != nil {
		return err
	}
	return f.Votes.CommitTally(ctx, s, cur, c)
}

// The leak check leaves out the goroutines of idle keep-alive connections
// (a pool's size moves with how wide a burst ran) and counts the rest.
func TestGoroutinesTellIdleConnectionsApart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	// Kept alive: the client's read and write loops and the server's wait,
	// 3 more pooled goroutines than before the connection. Idle connections
	// other tests of this process left close on their own meanwhile, which
	// lowers the count: a connection that met one is closed and another
	// tried, until none is left to close.
	var all, pooled, before, sockets, socketsBefore int
	for try := 1; ; try++ {
		_, before, socketsBefore = goroutines()
		client := &http.Client{Transport: &http.Transport{}}
		for range 3 {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if all, pooled, sockets = goroutines(); pooled >= before+3 && sockets >= socketsBefore+2 {
				break
			}
		}
		if pooled >= before+3 && sockets >= socketsBefore+2 && all >= pooled || try == 50 {
			defer client.CloseIdleConnections()
			break
		}
		client.CloseIdleConnections()
		srv.CloseClientConnections()
	}
	if pooled < before+3 || all < pooled {
		t.Fatalf("pooled %d (before %d) of %d goroutines: want the idle connection's 3 among them", pooled, before, all)
	}
	// Its two sockets (the client's end, the server's) are counted apart
	// from the open files, as a leaked one would not be.
	if sockets < socketsBefore+2 {
		t.Fatalf("idle sockets %d (before %d): want the connection's 2 ends among them", sockets, socketsBefore)
	}
	// Goroutines stuck elsewhere are not pooled.
	stuck := make(chan struct{})
	for range 5 {
		go func() { <-stuck }()
	}
	defer close(stuck)
	all2, pooled2, _ := goroutines()
	if all2-pooled2 < all-pooled+5 {
		t.Errorf("5 blocked goroutines were not counted: %d then %d outside the pools", all-pooled, all2-pooled2)
	}
}

// A client connection whose response body was never closed waits for the
// body, not for the next response: its socket is not an idle one.
func TestIdleSocketIsOneWaitingForTheNextMessage(t *testing.T) {
	for _, c := range []struct {
		stack string
		idle  bool
	}{
		{"#\tbufio.(*Reader).Peek+0x4f\n#\tnet/http.(*persistConn).readLoop+0x1a5", true},
		{"#\tbufio.(*Reader).Peek+0x4f\n#\tnet/http.(*conn).serve+0x7a1", true},
		{"#\truntime.selectgo+0x7f5\n#\tnet/http.(*persistConn).readLoop+0xd1b", false},   // waiting for its body to be read
		{"#\tnet/http.(*conn).readRequest+0x163\n#\tnet/http.(*conn).serve+0x7a1", false}, // reading a request
		{"#\truntime.selectgo+0x7f5\n#\tnet/http.(*persistConn).writeLoop+0x1e5", false},  // no socket of its own
	} {
		if got := idleSocket(c.stack); got != c.idle {
			t.Errorf("idleSocket(%q) = %v, want %v", c.stack, got, c.idle)
		}
	}
}
