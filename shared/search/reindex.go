package search

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// Indexes manages the indexes behind the search alias and the write alias
// (searchos.Engine satisfies it).
type Indexes interface {
	Index
	// Indexes returns the indexes the search alias and the write alias name.
	Indexes(ctx context.Context) (read, write []string, err error)
	CreateIndex(ctx context.Context, name string) error
	// AddWriteIndex has the indexer write to name too.
	AddWriteIndex(ctx context.Context, name string) error
	// Refresh makes every write acknowledged so far searchable in name.
	Refresh(ctx context.Context, name string) error
	// Switch points the search alias at to instead of from, and stops the
	// writes to from, atomically.
	Switch(ctx context.Context, from []string, to string) error
	DeleteIndex(ctx context.Context, name string) error
}

// DefaultRefreshWait is Reindex.RefreshWait's default: the local engine
// (ZincSearch, which answers a bulk before it indexes it) took 2 to 4
// minutes to index 100,000 small documents on one core, most of it after
// the scan had ended.
const DefaultRefreshWait = 10 * time.Minute

// DefaultReindexBatch is how many changes a reindex's bulk request
// carries when Reindex.Batch is 0: as many as a full stream batch of the
// indexer.
const DefaultReindexBatch = 1000

// ChangeScanner lists every key's latest record of the objects table,
// tombstones included, as changes (fn may be called from several
// goroutines at once).
type ChangeScanner interface {
	ScanChanges(ctx context.Context, fn func([]Change) error) error
}

// Reindex builds a new index from the table while the stream keeps
// writing, then swaps it in:
//
//  1. create the index and add it to the write alias, so the indexer's
//     next batches reach it too;
//  2. wait Settle, for every indexer to see the write alias anew (an
//     indexer caches it for a few seconds);
//  3. scan the table and write each key's latest record into the new
//     index at its external version: a change the stream wrote first
//     refuses the scan's older one, and a stream change after the scan
//     read its key reaches the new index through the write alias;
//  4. refresh the new index, so every document written is searchable;
//  5. point the search alias at the new index and take the old ones out
//     of both aliases, in one atomic update: a search sees the old index
//     or the new one, whole, never an empty or half one;
//  6. wait Linger, so searches sent to the old indexes just before the
//     switch finish, then delete them (unless KeepOld).
//
// The same run gives a stack that turns search on over an existing table
// its first full index.
type Reindex struct {
	Indexes  Indexes
	Table    ChangeScanner
	Payloads Payloads
	// Name names the new index (the alias and the time, e.g.
	// "ddbpipe-objects-20261128T221500").
	Name   string
	Settle time.Duration
	// Linger is how long the old indexes stay after the switch, for the
	// searches already on their way to them (default 2 s; negative: none).
	Linger  time.Duration
	KeepOld bool
	// Batch is how many changes one bulk request carries (default
	// DefaultReindexBatch).
	Batch int
	// Writers is how many bulk requests are on their way at once (default
	// 1: the engine indexes one bulk at a time as fast as several, and
	// the live indexer shares it meanwhile). The scan reads ahead by one
	// batch per writer.
	Writers int
	// RefreshWait bounds how long the refresh before the switch may wait
	// for the engine to make every written document searchable (default
	// DefaultRefreshWait). An engine still indexing what it acknowledged
	// answers a refresh with ErrUnavailable; the refresh is asked again
	// until it succeeds or RefreshWait passes.
	RefreshWait time.Duration
	// Progress is told the documents written so far, now and then.
	Progress func(ReindexProgress)
	Indexer  Indexer // settings of the writes (texts, retries); Index, Payloads and Target are set by Run
}

// ReindexProgress is how far a reindex has come.
type ReindexProgress struct {
	Scanned, Written, Newer, Refused int
	Elapsed                          time.Duration
	// Refreshing: every document is written, and the refresh waits for
	// the engine to make them searchable.
	Refreshing bool
}

// ReindexResult is what a reindex did.
type ReindexResult struct {
	Index    string   // the new index
	Replaced []string // the indexes it replaced (deleted unless KeepOld)
	ReindexProgress
	Requests int
	// When each step ended, from Run's start: the wait for the indexers
	// (Settle), the scan and its bulk requests, the refresh and the switch
	// (from then on searches read the new index).
	Settled, Loaded, Refreshed, Switched time.Duration
}

// Run rebuilds the index. On failure before the switch, the new index
// is taken out of the write alias and deleted, and the search alias still
// names the old one.
func (r *Reindex) Run(ctx context.Context) (ReindexResult, error) {
	began := time.Now()
	res := ReindexResult{Index: r.Name}
	read, write, err := r.Indexes.Indexes(ctx)
	if err != nil {
		return res, fmt.Errorf("search: reindex: %w", err)
	}
	if slices.Contains(read, r.Name) || slices.Contains(write, r.Name) {
		return res, fmt.Errorf("search: reindex: index %s is in use already", r.Name)
	}
	if err := r.Indexes.CreateIndex(ctx, r.Name); err != nil {
		return res, fmt.Errorf("search: reindex: %w", err)
	}
	if err := r.Indexes.AddWriteIndex(ctx, r.Name); err != nil {
		r.abandon()
		return res, fmt.Errorf("search: reindex: %w", err)
	}
	if err := retry.Sleep(ctx, r.Settle); err != nil {
		r.abandon()
		return res, err
	}
	res.Settled = time.Since(began)
	if err := r.load(ctx, began, &res); err != nil {
		r.abandon()
		return res, fmt.Errorf("search: reindex: %w", err)
	}
	res.Loaded = time.Since(began)
	// Searchable before it is searched: a refresh makes the last bulks
	// visible (OpenSearch shows writes on its next refresh, a second later).
	if err := r.refresh(ctx, began, res.ReindexProgress); err != nil {
		r.abandon()
		return res, fmt.Errorf("search: reindex: %w", err)
	}
	res.Refreshed = time.Since(began)
	old := unique(read, write, r.Name)
	if err := r.Indexes.Switch(ctx, old, r.Name); err != nil {
		r.abandon()
		return res, fmt.Errorf("search: reindex: switch the aliases: %w", err)
	}
	res.Replaced = old
	res.Switched = time.Since(began)
	if !r.KeepOld {
		linger := r.Linger
		if linger == 0 {
			linger = 2 * time.Second
		}
		// A search that resolved the alias before the switch may still
		// reach an old index: deleted under it, it would come back empty
		// (the bench saw one such search at the switch).
		if err := retry.Sleep(ctx, linger); err != nil {
			return res, fmt.Errorf("search: reindex: switched to %s; the old indexes %v are left: %w", r.Name, old, err)
		}
		for _, o := range old {
			if err := r.Indexes.DeleteIndex(ctx, o); err != nil {
				return res, fmt.Errorf("search: reindex: switched to %s; the old index %s is left: %w", r.Name, o, err)
			}
		}
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// refresh asks for the new index's refresh until the engine has made
// every write searchable (it answers ErrUnavailable until then), for at
// most RefreshWait.
func (r *Reindex) refresh(ctx context.Context, began time.Time, p ReindexProgress) error {
	wait := r.RefreshWait
	if wait <= 0 {
		wait = DefaultRefreshWait
	}
	deadline := time.Now().Add(wait)
	for {
		err := r.Indexes.Refresh(ctx, r.Name)
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine has not made the writes searchable in %s: %w", wait, err)
		}
		if r.Progress != nil {
			p.Refreshing, p.Elapsed = true, time.Since(began)
			r.Progress(p)
		}
		if serr := retry.Sleep(ctx, min(time.Second, wait/100)); serr != nil {
			return err
		}
	}
}

// load writes every key's latest record into the new index: the scan's
// segments gather the changes into batches, which Writers send.
func (r *Reindex) load(ctx context.Context, began time.Time, res *ReindexResult) error {
	ix := r.Indexer
	ix.Index, ix.Payloads, ix.Target = r.Indexes, r.Payloads, r.Name
	batch, writers := r.Batch, r.Writers
	if batch <= 0 {
		batch = DefaultReindexBatch
	}
	if writers <= 0 {
		writers = 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var resMu sync.Mutex
	apply := func(cs []Change) error {
		out := ix.Apply(ctx, cs)
		resMu.Lock()
		defer resMu.Unlock()
		res.Scanned += out.Changes
		res.Written += out.Documents
		res.Newer += out.Newer
		res.Refused += len(out.Refused)
		res.Requests += out.Requests
		if r.Progress != nil {
			p := res.ReindexProgress
			p.Elapsed = time.Since(began)
			r.Progress(p)
		}
		return out.Err
	}
	batches := make(chan []Change, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for cs := range batches {
				if err := apply(cs); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	send := func(cs []Change) error {
		select {
		case batches <- cs:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	var mu sync.Mutex
	var pending []Change
	err := r.Table.ScanChanges(ctx, func(cs []Change) error {
		mu.Lock()
		pending = append(pending, cs...)
		var full [][]Change
		for len(pending) >= batch {
			full = append(full, pending[:batch:batch])
			pending = pending[batch:]
		}
		mu.Unlock()
		for _, b := range full {
			if err := send(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && len(pending) > 0 {
		err = send(pending)
	}
	close(batches)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return cause // a writer's error (or the caller's), which stopped the scan
	}
	return err
}

// abandon deletes the new index (which takes it out of the aliases), so
// a failed reindex leaves the aliases as they were.
func (r *Reindex) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Indexes.DeleteIndex(ctx, r.Name); err != nil && r.Indexer.Log != nil {
		r.Indexer.Log.Warn("a failed reindex left its index behind; delete it", "index", r.Name, "err", err)
	}
}

// unique is the indexes of a and b but skip, once each, sorted.
func unique(a, b []string, skip string) []string {
	var out []string
	for _, s := range append(slices.Clone(a), b...) {
		if s != skip && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
