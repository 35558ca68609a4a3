package objects_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// The shared-blob invariants are checked by running the actors of a
// scenario (writers, the reaper, the sweeper, a finalizer) in every order
// of their calls to the table and the bucket, one call at a time, and,
// in a second pass, by crashing each actor at each of its calls (before
// the call takes effect, or after it took effect with its reply lost).
// After every call no reference may dangle; after the crash, the
// recovery the stack would run (the stream's retry of the reaper, two
// sweeps past the grace and the delete lease) must leave no orphan and
// every document readable.

// actorKey carries an actor's name in its context.
type actorKey struct{}

// sched runs actors one call at a time, in the order of a schedule.
type sched struct {
	t        *testing.T
	arrivals chan arrival
	mu       sync.Mutex
	current  string // the actor that runs now
	calls    map[string]int
	crash    *crash // nil: none
	crashed  map[string]bool
}

type arrival struct {
	actor  string
	op     string
	resume chan struct{}
	done   bool
}

// crash fails an actor's nth call (1-based): before it takes effect (the
// actor stops), refused (nothing applied, and the actor is told so:
// ErrNotApplied), or after it took effect (the reply is lost, the actor
// stops).
type crash struct {
	actor string
	call  int
	mode  crashMode
}

type crashMode int

const (
	crashBefore crashMode = iota
	crashRefused
	crashAfter
)

func (m crashMode) String() string { return [...]string{"before", "refused", "after"}[m] }

var (
	errInjected        = fmt.Errorf("injected crash: %w", errors.New("connection reset"))
	errInjectedRefusal = fmt.Errorf("injected refusal: %w", objects.ErrNotApplied)
)

// gate parks the calling actor until the schedule lets it run.
func (s *sched) gate(ctx context.Context, op string) error {
	a, _ := ctx.Value(actorKey{}).(string)
	if a == "" {
		return nil // setup, checks and recovery run straight
	}
	s.mu.Lock()
	crashed := s.crashed[a]
	s.mu.Unlock()
	if crashed {
		return errInjected // a crashed actor does nothing more
	}
	resume := make(chan struct{})
	s.arrivals <- arrival{actor: a, op: op, resume: resume}
	<-resume
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[a]++
	if c := s.crash; c != nil && c.actor == a && c.call == s.calls[a] {
		switch c.mode {
		case crashBefore:
			s.crashed[a] = true
			return errInjected
		case crashRefused:
			return errInjectedRefusal
		}
	}
	return nil
}

// after fails the current actor's call once it took effect, if the crash
// says so.
func (s *sched) after(string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.current
	if c := s.crash; c != nil && c.actor == a && c.call == s.calls[a] && c.mode == crashAfter && !s.crashed[a] {
		s.crashed[a] = true
		return errInjected
	}
	return nil
}

// world is one scenario's store.
type world struct {
	table  *objectstest.Table
	bucket *objectstest.Bucket
	store  *objects.Store
	now    time.Time
	mu     sync.Mutex
	ids    int
}

func newWorld() *world {
	w := &world{table: objectstest.NewTable(), bucket: objectstest.NewBucket("b"), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	w.bucket.Now = w.clock
	w.store = &objects.Store{
		Items: w.table, Chunks: w.table, Blobs: w.bucket, Shared: w.table,
		Now: w.clock, NewID: w.newID,
		// Documents over 1 KiB go to S3: the scenarios' 2 KiB document
		// does, and every run hashes it a few times (20 KiB took a third
		// of the model's CPU time in SHA-256).
		Policy: objects.Policy{InlineMax: 1 << 10},
		// One try per step: a crashed actor stays crashed, and a retry
		// repeats a step the interleavings already run once.
		ReleaseTries: 1,
	}
	return w
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *world) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

func (w *world) newID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids++
	return fmt.Sprintf("w%04d", w.ids)
}

const sweepGrace = time.Hour

func (w *world) sweeper() *objects.Sweeper {
	return &objects.Sweeper{Table: sweepTable{w.table}, Blobs: w.bucket, Shared: w.store, Grace: sweepGrace, Now: w.clock}
}

// sweepTable is the fake table as the sweeper needs it (no chunk marks:
// these scenarios write no chunks).
type sweepTable struct{ *objectstest.Table }

func (sweepTable) MarkChunk(context.Context, string, time.Time) (bool, error)   { return false, nil }
func (sweepTable) DeleteChunk(context.Context, string, time.Time) (bool, error) { return false, nil }

// check fails on a dangling reference (and, with clean, on an orphan).
func (w *world) check(t *testing.T, when string, clean bool) {
	t.Helper()
	r, err := objects.Check(context.Background(), w.table, w.bucket)
	if err != nil {
		t.Fatalf("%s: check: %v", when, err)
	}
	if err := r.DanglingErr(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if clean {
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
}

var (
	docX = objectstest.Random(2<<10, 7)
	putX = objects.PutOptions{NoCompress: true}
)

// scenario is a set of actors over a world prepared by setup; expect
// checks the end state once recovery is done.
type scenario struct {
	name   string
	setup  func(t *testing.T, w *world) map[string]func(ctx context.Context, w *world) error
	expect func(t *testing.T, w *world)
}

// run runs a scenario in the order choices gives (then the first actor
// able to run, at each later step), with crash c, and returns the choices
// made and how many actors could run at each step.
func run(t *testing.T, sc scenario, choices []int, c *crash) (made, widths []int, trace []string) {
	t.Helper()
	w := newWorld()
	actors := sc.setup(t, w)
	s := &sched{t: t, arrivals: make(chan arrival), calls: map[string]int{}, crash: c, crashed: map[string]bool{}}
	w.table.Gate, w.bucket.Gate = s.gate, s.gate
	w.table.After, w.bucket.After = s.after, s.after
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range actors {
			if !yield(n) {
				return
			}
		}
	})
	errs := map[string]error{}
	var errMu sync.Mutex
	for _, n := range names {
		go func() {
			ctx := context.WithValue(context.Background(), actorKey{}, n)
			err := actors[n](ctx, w)
			errMu.Lock()
			errs[n] = err
			errMu.Unlock()
			s.arrivals <- arrival{actor: n, done: true}
		}()
	}
	parked := map[string]arrival{}
	live := len(names)
	wait := func(n int) { // n arrivals
		for range n {
			a := <-s.arrivals
			if a.done {
				live--
				continue
			}
			parked[a.actor] = a
		}
	}
	wait(len(names))
	for step := 0; len(parked) > 0; step++ {
		ready := slices.Sorted(func(yield func(string) bool) {
			for n := range parked {
				if !yield(n) {
					return
				}
			}
		})
		pick := 0
		if step < len(choices) {
			pick = choices[step]
		}
		made, widths = append(made, pick), append(widths, len(ready))
		a := parked[ready[pick]]
		delete(parked, a.actor)
		trace = append(trace, a.actor+":"+a.op)
		s.mu.Lock()
		s.current = a.actor
		s.mu.Unlock()
		close(a.resume)
		wait(1)
		s.mu.Lock()
		s.current = ""
		s.mu.Unlock()
		w.check(t, strings.Join(trace, " "), false)
	}
	if live != 0 {
		t.Fatalf("%d actors neither parked nor done", live)
	}
	w.table.Gate, w.bucket.Gate, w.table.After, w.bucket.After = nil, nil, nil, nil
	for n, err := range errs {
		if err != nil && c == nil {
			t.Fatalf("%s: %s failed without a crash: %v", strings.Join(trace, " "), n, err)
		}
	}
	recover := func(what string) {
		t.Helper()
		w.check(t, strings.Join(trace, " ")+" → "+what, false)
	}
	// Recovery: the stream retries the reaper's batch (a reap is
	// idempotent), then sweeps past the delete lease and the grace.
	if reap, ok := actors["reaper"]; ok && c != nil && c.actor == "reaper" {
		if err := reap(context.Background(), w); err != nil {
			t.Fatalf("%s: the reaper's retry: %v", strings.Join(trace, " "), err)
		}
		recover("reaper retried")
	}
	for i := range 2 {
		w.advance(objects.DefaultDeleteLease + sweepGrace + time.Minute)
		if res := w.sweeper().Sweep(context.Background()); res.Err != nil || res.DeleteErr != nil {
			t.Fatalf("%s: sweep %d: %v %v", strings.Join(trace, " "), i+1, res.Err, res.DeleteErr)
		}
		recover(fmt.Sprintf("sweep %d", i+1))
	}
	w.check(t, strings.Join(trace, " ")+" → recovered", true)
	sc.expect(t, w)
	return made, widths, trace
}

// interleavings runs every order of a scenario's calls (with crash c) and
// returns how many it ran.
func interleavings(t *testing.T, sc scenario, c *crash) int {
	t.Helper()
	var prefix []int
	for n := 1; ; n++ {
		made, widths, _ := run(t, sc, prefix, c)
		i := len(made) - 1
		for i >= 0 && made[i]+1 >= widths[i] {
			i--
		}
		if i < 0 {
			return n
		}
		prefix = append(made[:i:i], made[i]+1)
		if t.Failed() {
			return n
		}
	}
}

// mustGet reads a document and compares it.
func mustGet(t *testing.T, w *world, key string, want []byte) {
	t.Helper()
	got, err := w.store.Get(context.Background(), key, 0)
	if err != nil || !bytes.Equal(got.Body, want) {
		t.Fatalf("%s: %v (%d bytes), want %d bytes", key, err, len(got.Body), len(want))
	}
}

// mustPut writes a document outside the schedule.
func mustPut(t *testing.T, w *world, key string, body []byte) objects.Record {
	t.Helper()
	r, err := w.store.Put(context.Background(), key, body, putX)
	if err != nil || r.Kind != objects.InS3 {
		t.Fatalf("put %s: %v (kind %s)", key, err, r.Kind)
	}
	return r
}

// deleted writes key with body, deletes it, and returns the history item
// the stream reports removed: what the reaper gets.
func deleted(t *testing.T, w *world, key string, body []byte) objects.Record {
	t.Helper()
	mustPut(t, w, key, body)
	if _, err := w.store.Delete(context.Background(), key, objects.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rm := w.table.Removed()
	if len(rm) != 1 {
		t.Fatalf("%d removed items, want 1", len(rm))
	}
	return rm[0]
}

func reaping(removed objects.Record) func(ctx context.Context, w *world) error {
	return func(ctx context.Context, w *world) error { return w.store.Reap(ctx, removed) }
}

func writing(key string, body []byte) func(ctx context.Context, w *world) error {
	return func(ctx context.Context, w *world) error {
		_, err := w.store.Put(ctx, key, body, putX)
		return err
	}
}

// readableIfWritten: a write that returned may have committed or not (a
// crash); if its version is there, its document reads back.
func readableIfWritten(t *testing.T, w *world, key string, want []byte) {
	t.Helper()
	if _, err := w.store.Stat(context.Background(), key, 0); errors.Is(err, objects.ErrNotFound) {
		return
	}
	mustGet(t, w, key, want)
}

var scenarios = []scenario{
	{
		// Writer A finds the blob present and commits a reference while
		// the reaper deletes the blob's last other reference.
		name: "reaper vs write of the same bytes",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			rm := deleted(t, w, "docs/a", docX)
			return map[string]func(context.Context, *world) error{"reaper": reaping(rm), "writer": writing("docs/b", docX)}
		},
		expect: func(t *testing.T, w *world) { readableIfWritten(t, w, "docs/b", docX) },
	},
	{
		// The sweeper finds the bytes of a write that crashed before its
		// commit (no head, old) while a new write of them runs.
		name: "sweeper vs write of an orphan's bytes",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			ck := objects.ContentKey(objects.SumOf(docX), int64(len(docX)))
			if _, err := w.bucket.PutBlob(context.Background(), objects.Blob{Key: ck, Body: docX, SHA256: objects.SumOf(docX)}); err != nil {
				t.Fatal(err)
			}
			w.advance(2 * sweepGrace)
			return map[string]func(context.Context, *world) error{
				"sweeper": func(ctx context.Context, w *world) error {
					res := w.sweeper().Sweep(ctx)
					return errors.Join(res.Err, res.DeleteErr)
				},
				"writer": writing("docs/b", docX),
			}
		},
		expect: func(t *testing.T, w *world) { readableIfWritten(t, w, "docs/b", docX) },
	},
	{
		// The reaper and the sweeper delete the same blob (the reaper's
		// batch late), while a write of the same bytes runs.
		name: "reaper vs sweeper",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			rm := deleted(t, w, "docs/a", docX)
			w.advance(2 * sweepGrace)
			return map[string]func(context.Context, *world) error{
				"reaper": reaping(rm),
				"sweeper": func(ctx context.Context, w *world) error {
					res := w.sweeper().Sweep(ctx)
					return errors.Join(res.Err, res.DeleteErr)
				},
			}
		},
		expect: func(t *testing.T, w *world) {
			if got := w.bucket.List(); len(got) != 0 {
				t.Fatalf("blobs left: %v", got)
			}
		},
	},
	{
		// The reaper's batch was lost: the sweeper finds the reference
		// record stale while a write of the same bytes runs.
		name: "sweeper after a lost reaper vs write",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			deleted(t, w, "docs/a", docX)
			w.advance(2 * sweepGrace)
			return map[string]func(context.Context, *world) error{
				"sweeper": func(ctx context.Context, w *world) error {
					res := w.sweeper().Sweep(ctx)
					return errors.Join(res.Err, res.DeleteErr)
				},
				"writer": writing("docs/b", docX),
			}
		},
		expect: func(t *testing.T, w *world) { readableIfWritten(t, w, "docs/b", docX) },
	},
	{
		// Two writes of the same new bytes under two keys.
		name: "write vs write",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			return map[string]func(context.Context, *world) error{"writer": writing("docs/a", docX), "writer2": writing("docs/b", docX)}
		},
		expect: func(t *testing.T, w *world) {
			readableIfWritten(t, w, "docs/a", docX)
			readableIfWritten(t, w, "docs/b", docX)
		},
	},
	{
		// A presigned upload of bytes whose last reference is being
		// reaped: the finalizer copies or shares, the reaper deletes.
		name: "reaper vs upload of the same bytes",
		setup: func(t *testing.T, w *world) map[string]func(context.Context, *world) error {
			rm := deleted(t, w, "docs/a", docX)
			upKey := objects.UploadKey("docs/u", "u1")
			ref, err := w.bucket.PutBlob(context.Background(), objects.Blob{Key: upKey, Body: docX, SHA256: objects.SumOf(docX)})
			if err != nil {
				t.Fatal(err)
			}
			return map[string]func(context.Context, *world) error{
				"reaper": reaping(rm),
				"uploader": func(ctx context.Context, w *world) error {
					_, err := w.store.CommitBlob(ctx, "docs/u", ref, objects.CommitBlobOptions{WriteID: "u1"})
					return err
				},
			}
		},
		expect: func(t *testing.T, w *world) {
			readableIfWritten(t, w, "docs/u", docX)
			if w.bucket.Has(objects.UploadKey("docs/u", "u1")) {
				if r, err := w.store.Stat(context.Background(), "docs/u", 0); err != nil || r.Blob.Key != objects.UploadKey("docs/u", "u1") {
					t.Fatalf("the uploaded object is left, referenced by %v (%v)", r.Blob, err)
				}
			}
		},
	},
}

// Every order of every scenario's calls: no dangling reference at any
// step, nothing left after the recovery.
func TestSharedBlobInterleavings(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			n := interleavings(t, sc, nil)
			t.Logf("%d orders", n)
		})
	}
}

// Every actor crashed at each of its calls (before the call, and after
// it with the reply lost), in every order.
func TestSharedBlobCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of runs")
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			// The calls each actor makes when it runs alone first.
			_, _, trace := run(t, sc, nil, nil)
			calls := map[string]int{}
			for _, step := range trace {
				calls[strings.SplitN(step, ":", 2)[0]]++
			}
			runs := 0
			for actor, n := range calls {
				for call := 1; call <= n; call++ {
					for _, mode := range []crashMode{crashBefore, crashRefused, crashAfter} {
						runs += interleavings(t, sc, &crash{actor: actor, call: call, mode: mode})
						if t.Failed() {
							t.Fatalf("crash of %s at call %d (%s)", actor, call, mode)
						}
					}
				}
			}
			t.Logf("%d runs", runs)
		})
	}
}

// The bytes of 100 writes under 100 keys are stored once, and 99 of the
// writes upload nothing.
func TestSameBytesStoredOnce(t *testing.T) {
	w := newWorld()
	shared := 0
	for i := range 100 {
		wr, err := w.store.Write(context.Background(), fmt.Sprintf("docs/%03d", i), docX, putX)
		if err != nil {
			t.Fatal(err)
		}
		if wr.BlobShared {
			shared++
		}
	}
	if got := w.bucket.List(); len(got) != 1 || got[0].Size != int64(len(docX)) {
		t.Fatalf("blobs %v, want one of %d bytes", got, len(docX))
	}
	if shared != 99 {
		t.Errorf("%d writes shared the stored bytes, want 99", shared)
	}
	if refs := w.table.SharedRefs(); len(refs) != 100 {
		t.Errorf("%d reference records, want 100", len(refs))
	}
	// Deleting all but one key keeps the blob; deleting the last frees it.
	ctx := context.Background()
	for i := range 100 {
		if _, err := w.store.Delete(ctx, fmt.Sprintf("docs/%03d", i), objects.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, rm := range w.table.Removed() {
			if err := w.store.Reap(ctx, rm); err != nil {
				t.Fatal(err)
			}
		}
		if kept := len(w.bucket.List()) == 1; kept != (i < 99) {
			t.Fatalf("after deleting %d keys: blob kept %t", i+1, kept)
		}
	}
	ck := objects.ContentKey(objects.SumOf(docX), int64(len(docX)))
	if h := w.table.Heads()[ck]; h.State != objects.BlobGone {
		t.Errorf("head %+v, want gone", h)
	}
	w.check(t, "after the deletes", true)
}

// A release that holds the mark tries its steps again: a bucket that
// fails twice still has the bytes deleted and the head left gone, and a
// table that cannot say whether a reference exists gets the mark lifted,
// so writes share the bytes again instead of storing their own.
func TestReleaseTriesAgainWhileItHoldsTheMark(t *testing.T) {
	blink := errors.New("connection refused")
	tests := []struct {
		name     string
		op       string
		fails    int
		tries    int
		released bool
		state    objects.BlobState
		wantErr  bool
	}{
		{"the bucket blinks", objectstest.OpPurgeBlob, 2, 3, true, objects.BlobGone, false},
		{"the bucket stays down", objectstest.OpPurgeBlob, 3, 3, false, objects.BlobDeleting, true},
		{"the table blinks at the head", objectstest.OpForgetBlob, 1, 3, true, objects.BlobGone, false},
		{"references cannot be read", objectstest.OpReferenced, 3, 3, false, objects.BlobLive, true},
		{"references read on a retry", objectstest.OpReferenced, 1, 3, true, objects.BlobGone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			w.store.ReleaseTries, w.store.ReleaseBackoff = tt.tries, retry.Backoff{Base: time.Millisecond, Max: time.Millisecond}
			ctx := context.Background()
			if _, err := w.store.Write(ctx, "a", docX, putX); err != nil {
				t.Fatal(err)
			}
			if _, err := w.store.Delete(ctx, "a", objects.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			failed, marked := 0, false
			hook := func(op string) error {
				mu.Lock()
				defer mu.Unlock()
				marked = marked || op == objectstest.OpMarkBlob
				if marked && op == tt.op && failed < tt.fails {
					failed++
					return blink
				}
				return nil
			}
			w.table.Before, w.bucket.Before = hook, hook
			var err error
			for _, rm := range w.table.Removed() {
				err = errors.Join(err, w.store.Reap(ctx, rm))
			}
			w.table.Before, w.bucket.Before = nil, nil
			if (err != nil) != tt.wantErr || tt.wantErr && !errors.Is(err, blink) {
				t.Fatalf("reap: %v, want an error %t", err, tt.wantErr)
			}
			ck := objects.ContentKey(objects.SumOf(docX), int64(len(docX)))
			if h := w.table.Heads()[ck]; h.State != tt.state {
				t.Errorf("head %+v, want %s", h, tt.state)
			}
			if got := len(w.bucket.List()) == 0; got != tt.released {
				t.Errorf("bytes deleted %t, want %t", got, tt.released)
			}
			if failed != tt.fails {
				t.Errorf("%d failures injected, want %d", failed, tt.fails)
			}
			w.check(t, tt.name, false)
		})
	}
}
