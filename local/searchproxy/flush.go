package searchproxy

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// ZincSearch makes writes searchable in batches, on a timer, and decides
// at write time whether a write inserts a new document or updates one by
// looking the id up in what it has flushed; a flush merges its writes by
// id. So a delete right after an insert it has not flushed is lost (it finds
// nothing to delete), and a second insert flushed apart from the first
// duplicates the document. The proxy therefore sends no write for a document
// until the engine serves its last insert or update, and a refresh or a get
// waits for what was written. A hit is the current write when its
// @timestamp (set by the engine on receipt) is not before the write was sent.

// pendingWrite is a write the engine may not serve yet.
type pendingWrite struct {
	at      time.Time
	deleted bool
	// ownTimestamp: the document names its own @timestamp, which the
	// engine keeps, so only its presence can be checked.
	ownTimestamp bool
}

// served reports whether a search's hit (nil: not found) shows the write.
func (w pendingWrite) served(h *hit) bool {
	if w.deleted {
		return h == nil
	}
	if h == nil {
		return false
	}
	at, err := time.Parse(time.RFC3339Nano, h.Timestamp)
	return w.ownTimestamp || err == nil && !at.Before(w.at)
}

type unflushed struct {
	mu     sync.Mutex
	writes map[docKey]pendingWrite
	adds   int
}

// forgetAfter is when a write nobody waited for is taken as served (the
// engine serves writes within its sync interval, 250 ms here), so the set
// holds only recent writes.
const forgetAfter = time.Minute

func (u *unflushed) add(k docKey, w pendingWrite) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.writes == nil {
		u.writes = map[docKey]pendingWrite{}
	}
	u.writes[k] = w
	if u.adds++; u.adds%4096 == 0 {
		for k, old := range u.writes {
			if w.at.Sub(old.at) > forgetAfter {
				delete(u.writes, k)
			}
		}
	}
}

func (u *unflushed) get(k docKey) (pendingWrite, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	w, ok := u.writes[k]
	return w, ok
}

// latest lists the keys of up to n of the most recent writes of each index.
func (u *unflushed) latest(n int) []docKey {
	u.mu.Lock()
	byIndex := map[string][]docKey{}
	for k := range u.writes {
		byIndex[k.index] = append(byIndex[k.index], k)
	}
	var out []docKey
	for _, keys := range byIndex {
		slices.SortFunc(keys, func(a, b docKey) int { return u.writes[b].at.Compare(u.writes[a].at) })
		out = append(out, keys[:min(n, len(keys))]...)
	}
	u.mu.Unlock()
	return out
}

// remove forgets k's write if it is still w (a later write stays).
func (u *unflushed) remove(k docKey, w pendingWrite) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cur, ok := u.writes[k]; ok && cur == w {
		delete(u.writes, k)
	}
}

// flushWait bounds a wait for writes to be served; past it the proxy goes
// on (and logs a warning).
const flushWait = 10 * time.Second

// awaitFlushed waits until the engine serves the last write of each of the
// items' documents (their locks are held: nothing else writes them),
// deletes included: under a fresh make test's load TestConcurrentBulks
// once found a document's live version 12 gone, which an index sent
// before the engine applied an earlier delete would explain (not proven:
// it did not happen again in 16 runs, under load or not).
func (p *Proxy) awaitFlushed(ctx context.Context, items []*item) {
	keys := make([]docKey, 0, len(items))
	for _, it := range items {
		if _, ok := p.unflushed.get(it.key()); ok {
			keys = append(keys, it.key())
		}
	}
	p.awaitServed(ctx, keys, flushWait)
}

// awaitSearchable waits until the engine serves the last write of each of
// the items' documents (at most the last 100 documents written), as a
// refresh=wait_for asks.
func (p *Proxy) awaitSearchable(ctx context.Context, items []*item) {
	seen := map[docKey]bool{}
	var keys []docKey
	for i := len(items) - 1; i >= 0 && len(keys) < 100; i-- {
		k := items[i].key()
		if !seen[k] && items[i].err == nil {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	p.awaitServed(ctx, keys, 5*time.Second)
}

// firstRecheck is awaitServed's first pause between two looks; each pause
// doubles, up to half the engine's refresh interval. The engine makes
// writes searchable once a tick, so a look each 20 ms found nothing new 11
// times in 12 at 250 ms, and a reindex's final refresh, waiting a minute
// for the engine to index 100,000 documents, searched 200 ids 50 times a
// second on the engine it waited for.
const firstRecheck = 20 * time.Millisecond

// awaitServed polls the engine by id until it serves the pending writes of
// keys, or limit passes; it returns how many it did not see served.
func (p *Proxy) awaitServed(ctx context.Context, keys []docKey, limit time.Duration) (left int) {
	waiting := map[string]map[string]pendingWrite{} // index → id → write
	for _, k := range keys {
		if w, ok := p.unflushed.get(k); ok {
			if waiting[k.index] == nil {
				waiting[k.index] = map[string]pendingWrite{}
			}
			waiting[k.index][k.id] = w
		}
	}
	deadline := time.Now().Add(limit)
	for index, ids := range waiting {
		pause := firstRecheck
		for len(ids) > 0 {
			list := make([]string, 0, len(ids))
			for id := range ids {
				list = append(list, id)
			}
			hits, err := p.searchIDs(ctx, index, list, false)
			if err == errIndexMissing {
				// The index was deleted: its writes have nothing left to wait for.
				for id, w := range ids {
					p.unflushed.remove(docKey{index, id}, w)
				}
				break
			}
			if err == nil {
				found := map[string]*hit{}
				for i := range hits {
					found[hits[i].ID] = &hits[i]
				}
				for id, w := range ids {
					if w.served(found[id]) {
						delete(ids, id)
						p.unflushed.remove(docKey{index, id}, w)
					}
				}
			}
			if len(ids) == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				p.log.Warn("searchproxy: writes not served in time; going on", "index", index, "documents", len(ids), "error", err)
				left += len(ids)
				break
			}
			_ = retry.Sleep(ctx, pause)
			pause = min(2*pause, max(firstRecheck, p.o.RefreshInterval/2))
		}
	}
	return left
}
