package objectslambda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
)

// crashingItems fails the next commit, as a crash or a lost reply would:
// before it reaches the table, or after it took effect. hold, if set,
// makes every commit wait for it to close (a commit that lands late).
type crashingItems struct {
	objects.Items
	mu      sync.Mutex
	err     error
	applied bool
	armed   bool
	hold    chan struct{}
	waiting chan struct{} // closed when a commit starts waiting on hold
}

func (c *crashingItems) arm(err error, applied bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err, c.applied, c.armed = err, applied, true
}

func (c *crashingItems) Commit(ctx context.Context, cm objects.Commit) error {
	c.mu.Lock()
	armed, err, applied, hold := c.armed, c.err, c.applied, c.hold
	c.armed = false
	c.mu.Unlock()
	if hold != nil {
		close(c.waiting)
		<-hold
	}
	if !armed {
		return c.Items.Commit(ctx, cm)
	}
	if applied {
		if cerr := c.Items.Commit(ctx, cm); cerr != nil {
			return cerr
		}
	}
	return err
}

// kinds are the placements with a payload outside the version item.
var kinds = []struct {
	name string
	kind objects.Kind
	body []byte
	opts objects.PutOptions
}{
	{name: "s3", kind: objects.InS3, body: objectstest.Random(20<<10, 1), opts: objects.PutOptions{NoCompress: true}},
	{name: "chunked", kind: objects.Chunked, body: objectstest.Random(40<<10, 2), opts: objects.PutOptions{NoCompress: true, KeepInTable: true}},
}

// A crash between the payload write and the commit, with each outcome the
// commit can have: no reference ever dangles, the payload of a commit that
// did not happen is an orphan until the sweep after the grace removes it,
// and a committed payload is never swept.
func TestCrashBetweenPayloadWriteAndCommit(t *testing.T) {
	outcomes := []struct {
		name      string
		err       error
		applied   bool
		wantErr   error // errors.Is
		committed bool
		orphaned  bool // the payload stays until a sweep
	}{
		{name: "certain failure", err: fmt.Errorf("injected refusal: %w", objects.ErrNotApplied), wantErr: objects.ErrNotApplied},
		{name: "unknown outcome, not applied", err: errors.New("injected: connection reset"), orphaned: true},
		{name: "unknown outcome, applied", err: errors.New("injected: reply lost"), applied: true, committed: true},
	}
	for _, k := range kinds {
		for _, o := range outcomes {
			t.Run(k.name+"/"+o.name, func(t *testing.T) {
				e := newEnv(t)
				ctx := context.Background()
				crash := &crashingItems{Items: e.items}
				e.store.Items = crash
				v1, err := e.store.Put(ctx, "docs/a", k.body[:len(k.body)-1], k.opts)
				if err != nil || v1.Kind != k.kind {
					t.Fatalf("put v1: %v (kind %s), want kind %s", err, v1.Kind, k.kind)
				}
				crash.arm(o.err, o.applied)
				opts := k.opts
				opts.IfMatch = ptr(int64(1))
				if _, err := e.store.Put(ctx, "docs/a", k.body, opts); err == nil || o.wantErr != nil && !errors.Is(err, o.wantErr) {
					t.Fatalf("put v2: got %v, want a failure (%v)", err, o.wantErr)
				}
				before := e.mustHold(t, false)
				if got := len(before.OrphanBlobs) + len(before.OrphanChunks); (got > 0) != o.orphaned {
					t.Fatalf("after the crash: %d orphan payloads, want some: %t", got, o.orphaned)
				}

				// A sweep now leaves the fresh payload alone.
				if res := e.sweep(t); res.Swept+res.ChunksSwept != 0 {
					t.Fatalf("a sweep within the grace deleted %d blobs, %d chunks", res.Swept, res.ChunksSwept)
				}
				e.mustHold(t, false)
				// Past the grace it goes (chunks: on the first sweep a
				// grace after the one that marked them).
				e.advance(grace + time.Minute)
				e.sweep(t)
				e.advance(2*grace + 2*time.Minute)
				e.sweep(t)
				e.mustHold(t, true)

				want, wantVersion := k.body[:len(k.body)-1], int64(1)
				if o.committed {
					want, wantVersion = k.body, 2
				}
				got, err := e.store.Get(ctx, "docs/a", 0)
				if err != nil || got.Version != wantVersion || !bytes.Equal(got.Body, want) {
					t.Fatalf("latest: version %d (%v), want version %d with its body", got.Version, err, wantVersion)
				}
			})
		}
	}
}

// A blob written just before the sweep's scan, whose commit lands after
// the sweep: the grace keeps it, and the reference never dangles.
func TestSweepRacesALateCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	late := &crashingItems{Items: e.items, hold: make(chan struct{}), waiting: make(chan struct{})}
	e.store.Items = late
	done := make(chan error, 1)
	go func() {
		_, err := e.store.Put(ctx, "docs/late", kinds[0].body, kinds[0].opts)
		done <- err
	}()
	<-late.waiting // the blob is written, the commit not yet
	if res := e.sweep(t); res.Swept != 0 || res.Listed != 1 {
		t.Fatalf("sweep listed %d, swept %d; want 1 listed and kept", res.Listed, res.Swept)
	}
	close(late.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.mustHold(t, true)
}

// history writes versions that the store then prunes or deletes: every
// REMOVE of a history item frees a payload.
func history(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	e.store.MaxVersions = 2
	for _, k := range kinds {
		for i := range 4 {
			body := bytes.Clone(k.body)
			body[0] ^= byte(i + 1)
			if _, err := e.store.Put(ctx, "docs/"+k.name, body, k.opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.store.Delete(ctx, "docs/"+kinds[0].name, objects.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A crash between the reference's removal and the payload's: the
// reaper's batches crash (the runner cuts them and fails the invocation)
// and are retried. References never dangle, and once the reaper is through
// no orphan is left.
func TestCrashBetweenReferenceDeleteAndPayloadDelete(t *testing.T) {
	e := newEnv(t)
	history(t, e)
	r := e.mustHold(t, false)
	// docs/s3: 4 blobs gone with their versions; docs/chunked: 2 pruned
	// versions of 5 chunks each.
	if len(r.OrphanBlobs) != 4 || len(r.OrphanChunks) != 10 {
		t.Fatalf("before the reaper: %d orphan blobs, %d orphan chunks; want 4 and 10", len(r.OrphanBlobs), len(r.OrphanChunks))
	}

	run := runner.New(runner.WithLogger(testLogger(t)))
	const fn = "ObjectsReaperFunction"
	if err := run.AddFunction(runner.Function{LogicalID: fn, Timeout: 10 * time.Second, Handler: lambda.NewHandler(e.reaper(t).Handle)}); err != nil {
		t.Fatal(err)
	}
	if _, err := run.AddStream(e.streams, nil, runner.StreamMapping{
		Function: fn, StreamARN: e.streamARN, BatchSize: 100, Window: 200 * time.Millisecond,
		ReportBatchItemFailures: true, Bisect: true, MaxRetryAttempts: 5, RetryBackoff: 10 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	run.SetFaults(runner.Faults{CrashNext: 2, Only: fn})
	stop, err := run.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := e.check(t)
		if err := r.DanglingErr(); err != nil {
			t.Fatal(err)
		}
		if r.Err() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reaper left orphans: %v", r.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range run.Stats() {
		if s.Function == fn && (s.Crashes != 2 || s.Discarded != 0) {
			t.Errorf("reaper stats %+v, want 2 crashes and nothing discarded", s)
		}
	}
}

// The same crash with the reaper never running (its batches all lost):
// the sweeper removes what it left.
func TestSweeperCoversALostReaper(t *testing.T) {
	e := newEnv(t)
	history(t, e)
	e.mustHold(t, false)
	e.advance(grace + time.Minute)
	first := e.sweep(t)
	e.advance(2*grace + 2*time.Minute)
	second := e.sweep(t)
	if first.Swept != 4 || first.ChunksMarked != 10 || second.ChunksSwept != 10 {
		t.Errorf("swept %d blobs, marked %d chunks, then swept %d; want 4, 10, 10", first.Swept, first.ChunksMarked, second.ChunksSwept)
	}
	e.mustHold(t, true)
	got, err := e.store.Get(context.Background(), "docs/chunked", 0)
	if err != nil || got.Version != 4 {
		t.Fatalf("docs/chunked: version %d, %v; want 4", got.Version, err)
	}
}
