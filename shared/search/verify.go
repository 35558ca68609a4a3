package search

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// Entry is one key at one version, as the table or the index holds it.
type Entry struct {
	Key     string
	Version int64
}

// TableScanner lists the live keys of the objects table at their latest
// version (tombstones left out), calling fn with each page; fn may be
// called from several goroutines at once.
type TableScanner interface {
	ScanLatest(ctx context.Context, fn func([]Entry) error) error
}

// IndexScanner lists every document of the index behind an alias.
type IndexScanner interface {
	ScanIndex(ctx context.Context, fn func([]Entry) error) error
}

// Mismatch is a key whose document is not at the table's version.
type Mismatch struct {
	Key          string
	Table, Index int64 // the versions; 0 where there is none
}

// Drift is how the index differs from the table.
type Drift struct {
	TableKeys, IndexDocs int
	Missing              []Entry    // live in the table, absent from the index
	Extra                []Entry    // in the index, not live in the table
	Behind               []Mismatch // the index holds an older version
	Ahead                []Mismatch // the index holds a newer version (the table moved back: never expected)
}

// None reports that the index equals the table.
func (d Drift) None() bool {
	return len(d.Missing)+len(d.Extra)+len(d.Behind)+len(d.Ahead) == 0
}

// Count is how many keys drift.
func (d Drift) Count() int { return len(d.Missing) + len(d.Extra) + len(d.Behind) + len(d.Ahead) }

// Verify compares the table with the index key by key: every live key at
// its version, and nothing else. The two are read one after the other, so
// a verify while the stream writes reports the changes in flight as drift:
// run it once the stream has drained (the CLI's -wait).
func Verify(ctx context.Context, table TableScanner, index IndexScanner) (Drift, error) {
	var mu sync.Mutex
	live := map[string]int64{}
	err := table.ScanLatest(ctx, func(es []Entry) error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range es {
			live[e.Key] = e.Version
		}
		return nil
	})
	if err != nil {
		return Drift{}, fmt.Errorf("search: verify: scan the table: %w", err)
	}
	d := Drift{TableKeys: len(live)}
	seen := make(map[string]bool, len(live))
	err = index.ScanIndex(ctx, func(es []Entry) error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range es {
			d.IndexDocs++
			seen[e.Key] = true
			v, ok := live[e.Key]
			switch {
			case !ok:
				d.Extra = append(d.Extra, e)
			case e.Version < v:
				d.Behind = append(d.Behind, Mismatch{Key: e.Key, Table: v, Index: e.Version})
			case e.Version > v:
				d.Ahead = append(d.Ahead, Mismatch{Key: e.Key, Table: v, Index: e.Version})
			}
		}
		return nil
	})
	if err != nil {
		return Drift{}, fmt.Errorf("search: verify: scan the index: %w", err)
	}
	for k, v := range live {
		if !seen[k] {
			d.Missing = append(d.Missing, Entry{Key: k, Version: v})
		}
	}
	byKey := func(a, b Entry) int { return cmp.Compare(a.Key, b.Key) }
	slices.SortFunc(d.Missing, byKey)
	slices.SortFunc(d.Extra, byKey)
	byMismatch := func(a, b Mismatch) int { return cmp.Compare(a.Key, b.Key) }
	slices.SortFunc(d.Behind, byMismatch)
	slices.SortFunc(d.Ahead, byMismatch)
	return d, nil
}
