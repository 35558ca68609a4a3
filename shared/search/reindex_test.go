package search

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// memIndexes is an engine of memIndexes behind a search alias and a
// write alias.
type memIndexes struct {
	mu          sync.Mutex
	idx         map[string]*memIndex
	read, write []string
}

func newMemIndexes(first string) *memIndexes {
	return &memIndexes{idx: map[string]*memIndex{first: newMemIndex()}, read: []string{first}, write: []string{first}}
}

func (m *memIndexes) Bulk(ctx context.Context, target string, ops []Op) ([]Outcome, error) {
	m.mu.Lock()
	targets := []string{target}
	if target == "write" {
		targets = slices.Clone(m.write)
	}
	m.mu.Unlock()
	var out []Outcome
	for _, t := range targets {
		m.mu.Lock()
		x, ok := m.idx[t]
		m.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: no index %s", ErrNoIndex, t)
		}
		o, err := x.Bulk(ctx, t, ops)
		if err != nil {
			return nil, err
		}
		out = o
	}
	return out, nil
}

func (m *memIndexes) Indexes(context.Context) ([]string, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.read), slices.Clone(m.write), nil
}

func (m *memIndexes) CreateIndex(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.idx[name] = newMemIndex()
	return nil
}

func (m *memIndexes) AddWriteIndex(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.write = append(m.write, name)
	return nil
}

func (m *memIndexes) Refresh(context.Context, string) error { return nil }

func (m *memIndexes) Switch(_ context.Context, from []string, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read = []string{to}
	m.write = slices.DeleteFunc(m.write, func(s string) bool { return slices.Contains(from, s) })
	return nil
}

func (m *memIndexes) DeleteIndex(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.idx, name)
	m.read = slices.DeleteFunc(m.read, func(s string) bool { return s == name })
	m.write = slices.DeleteFunc(m.write, func(s string) bool { return s == name })
	return nil
}

// scanner is a table of latest records; during calls fn with every page,
// so a test can write "the stream's" changes while the scan runs.
type scanner struct {
	changes []Change
	during  func()
	fail    error
}

func (s scanner) ScanChanges(_ context.Context, fn func([]Change) error) error {
	if s.during != nil {
		s.during()
	}
	if s.fail != nil {
		return s.fail
	}
	return fn(s.changes)
}

func TestReindexSwapsInAWholeIndexWhileTheStreamWrites(t *testing.T) {
	x := newMemIndexes("old")
	table := []Change{put("a", 1, "", 0), put("b", 1, "", 0), del("gone", 3)}
	stream := &Indexer{Index: x, Payloads: memPayloads{}, Target: "write"}
	r := &Reindex{
		Indexes: x, Payloads: memPayloads{}, Name: "new", Linger: time.Millisecond,
		Table: scanner{changes: table, during: func() {
			// the stream writes a newer "a" after the scan read the table
			if res := stream.Apply(context.Background(), []Change{put("a", 2, "", 0)}); res.Err != nil {
				t.Error(res.Err)
			}
		}},
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	read, write, _ := x.Indexes(context.Background())
	if !slices.Equal(read, []string{"new"}) || !slices.Equal(write, []string{"new"}) || x.idx["old"] != nil {
		t.Fatalf("read %v write %v old %v: want only the new index", read, write, x.idx["old"] != nil)
	}
	docs := x.idx["new"].docs
	if len(docs) != 2 || docs[DocID("a")].Version != 2 || docs[DocID("b")].Version != 1 {
		t.Errorf("new index holds %v: want a v2 (the stream's) and b v1", docs)
	}
	if res.Newer != 1 || res.Scanned != 3 || !slices.Equal(res.Replaced, []string{"old"}) {
		t.Errorf("result %+v: want 1 refused as older, 3 scanned, old replaced", res)
	}
	steps := []time.Duration{res.Settled, res.Loaded, res.Refreshed, res.Switched, res.Elapsed}
	if res.Settled <= 0 || !slices.IsSorted(steps) || res.Elapsed-res.Switched < r.Linger {
		t.Errorf("steps ended at %v (settled, loaded, refreshed, switched, all): want them in order, the linger after the switch", steps)
	}
}

func TestAFailedReindexLeavesTheOldIndex(t *testing.T) {
	x := newMemIndexes("old")
	r := &Reindex{Indexes: x, Payloads: memPayloads{}, Name: "new", Table: scanner{fail: errors.New("scan throttled")}}
	if _, err := r.Run(context.Background()); err == nil {
		t.Fatal("no error")
	}
	read, write, _ := x.Indexes(context.Background())
	if !slices.Equal(read, []string{"old"}) || !slices.Equal(write, []string{"old"}) || x.idx["new"] != nil {
		t.Errorf("read %v write %v new index %v: want the old index alone", read, write, x.idx["new"] != nil)
	}
}

// segments is a table read by four scan segments at once, each calling fn
// with pages of 7 changes.
type segments struct{ changes []Change }

func (s segments) ScanChanges(ctx context.Context, fn func([]Change) error) error {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for seg := range 4 {
		wg.Go(func() {
			var mine []Change
			for i := seg; i < len(s.changes); i += 4 {
				mine = append(mine, s.changes[i])
			}
			for len(mine) > 0 && errs[seg] == nil {
				n := min(7, len(mine))
				errs[seg] = fn(mine[:n])
				mine = mine[n:]
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// watched counts the bulk requests on their way at once, and each one's
// size.
type watched struct {
	*memIndexes
	mu        sync.Mutex
	now, most int
	sizes     []int
	failFrom  int // the bulk request from which every one fails (0: none)
}

func (w *watched) Bulk(ctx context.Context, target string, ops []Op) ([]Outcome, error) {
	w.mu.Lock()
	w.now++
	w.most = max(w.most, w.now)
	w.sizes = append(w.sizes, len(ops))
	fail := w.failFrom > 0 && len(w.sizes) >= w.failFrom
	w.mu.Unlock()
	defer func() { w.mu.Lock(); w.now--; w.mu.Unlock() }()
	time.Sleep(time.Millisecond) // long enough for a second writer to overlap
	if fail {
		return nil, fmt.Errorf("%w: engine down", ErrUnavailable)
	}
	return w.memIndexes.Bulk(ctx, target, ops)
}

// The scan's segments fill batches of Batch changes, which Writers send:
// one bulk request at a time by default, however many segments read.
func TestReindexBatchesTheSegmentsForItsWriters(t *testing.T) {
	var table []Change
	for i := range 95 {
		table = append(table, put(fmt.Sprintf("k%02d", i), 1, "", 0))
	}
	for _, writers := range []int{0, 3} {
		x := &watched{memIndexes: newMemIndexes("old")}
		r := &Reindex{Indexes: x, Payloads: memPayloads{}, Name: "new", Linger: -1, Table: segments{table}, Batch: 10, Writers: writers}
		res, err := r.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Written != 95 || len(x.idx["new"].docs) != 95 {
			t.Errorf("writers %d: wrote %d, the index holds %d; want 95", writers, res.Written, len(x.idx["new"].docs))
		}
		slices.Sort(x.sizes)
		if want := []int{5, 10, 10, 10, 10, 10, 10, 10, 10, 10}; !slices.Equal(x.sizes, want) {
			t.Errorf("writers %d: bulk sizes %v, want %v", writers, x.sizes, want)
		}
		if want := max(writers, 1); x.most > want {
			t.Errorf("writers %d: %d bulk requests at once, want at most %d", writers, x.most, want)
		}
	}
}

// A bulk request that fails stops the scan, and the run says why.
func TestReindexStopsWhenAWriteFails(t *testing.T) {
	var table []Change
	for i := range 200 {
		table = append(table, put(fmt.Sprintf("k%03d", i), 1, "", 0))
	}
	x := &watched{memIndexes: newMemIndexes("old"), failFrom: 2}
	r := &Reindex{Indexes: x, Payloads: memPayloads{}, Name: "new", Table: segments{table}, Batch: 10,
		Indexer: Indexer{Attempts: 1}}
	_, err := r.Run(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want the engine's", err)
	}
	if n := len(x.sizes); n > 3 {
		t.Errorf("%d bulk requests sent after the first failure; want the scan stopped", n)
	}
	if read, _, _ := x.Indexes(context.Background()); !slices.Equal(read, []string{"old"}) || x.idx["new"] != nil {
		t.Errorf("read %v, new index kept %v: want the old index alone", read, x.idx["new"] != nil)
	}
}

// refreshing answers a refresh ErrUnavailable until it has been asked
// busy times, as an engine still indexing a backlog does; fail, if set,
// is its answer instead.
type refreshing struct {
	*memIndexes
	busy, asked int
	fail        error
}

func (r *refreshing) Refresh(context.Context, string) error {
	r.asked++
	if r.fail != nil {
		return r.fail
	}
	if r.asked <= r.busy {
		return fmt.Errorf("%w: 200 of the latest writes not searchable yet", ErrUnavailable)
	}
	return nil
}

// A reindex asks again for a refresh the engine is not done with, until
// RefreshWait; any other error, or the wait run out, leaves the old index.
func TestReindexWaitsForTheRefresh(t *testing.T) {
	for _, c := range []struct {
		name      string
		busy      int
		fail      error
		wait      time.Duration
		switched  bool
		minAsked  int
		maxAsked  int
		wantError error
	}{
		{name: "searchable at once", busy: 0, wait: time.Minute, switched: true, minAsked: 1, maxAsked: 1},
		{name: "a backlog", busy: 5, wait: 10 * time.Second, switched: true, minAsked: 6, maxAsked: 6},
		{name: "never within the wait", busy: 1 << 30, wait: 50 * time.Millisecond, minAsked: 2, maxAsked: 1 << 30, wantError: ErrUnavailable},
		{name: "another error", fail: ErrNoIndex, wait: time.Minute, minAsked: 1, maxAsked: 1, wantError: ErrNoIndex},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := &refreshing{memIndexes: newMemIndexes("old"), busy: c.busy, fail: c.fail}
			waits := 0
			r := &Reindex{Indexes: x, Payloads: memPayloads{}, Name: "new", Table: scanner{}, Linger: -1, RefreshWait: c.wait,
				Progress: func(p ReindexProgress) {
					if p.Refreshing {
						waits++
					}
				}}
			_, err := r.Run(context.Background())
			if c.switched && waits != c.busy {
				t.Errorf("%d progress reports of the refresh's wait, want one per busy answer (%d)", waits, c.busy)
			}
			if c.wantError == nil && err != nil || c.wantError != nil && !errors.Is(err, c.wantError) {
				t.Fatalf("Run: %v, want %v", err, c.wantError)
			}
			if x.asked < c.minAsked || x.asked > c.maxAsked {
				t.Errorf("refresh asked %d times, want %d to %d", x.asked, c.minAsked, c.maxAsked)
			}
			read, _, _ := x.Indexes(context.Background())
			if want := map[bool]string{true: "new", false: "old"}[c.switched]; !slices.Equal(read, []string{want}) {
				t.Errorf("search alias on %v, want %s", read, want)
			}
		})
	}
}
