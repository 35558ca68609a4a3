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
