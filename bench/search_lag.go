package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// pacedRun is the indexer at a steady arrival rate.
type pacedRun struct {
	target      float64 // changes a second asked for
	n           int
	achieved    float64 // changes a second written
	batches     indexerBatches
	records     int // stream records delivered to the indexer
	invocations int
}

// paced writes new objects at up to 1,000 a second (each the two items of
// a commit) for 10 s at scale 1, the indexer running, and counts its bulk
// requests per 1,000 changes. DynamoDB Local may write fewer: the rate
// reached is reported.
func (b *searchBench) paced(ctx context.Context) error {
	p := &b.pacedRun
	p.target = 1000
	dur := max(time.Duration(float64(10*time.Second)*b.scale), 5*time.Second)
	recs := b.newRecords(len(b.recs), int(p.target*dur.Seconds()))
	alias := counter{url: b.env.Search.URL, index: b.engine.Alias()}
	base, err := alias.count(ctx)
	if err != nil {
		return err
	}
	before := functionStats(b.env.Runner, searchIndexer)
	from := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	written := 0
	for time.Since(from) < dur {
		if due := min(int(time.Since(from).Seconds()*p.target)+1, len(recs)); due > written {
			to := min(due, written+int(p.target/10)) // at most a tenth of a second's worth a request round
			if err := commitRecords(ctx, b.env.Clients.DynamoDB, b.table, b.items, recs[written:to]); err != nil {
				return fmt.Errorf("paced: %w", err)
			}
			written = to
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	p.n = written
	p.achieved = float64(p.n) / time.Since(from).Seconds()
	b.recs = append(b.recs, recs[:written]...)
	if _, err := watchCount(ctx, alias, base+p.n, b.limit(p.n)); err != nil {
		return fmt.Errorf("paced: %w", err)
	}
	p.batches = stackLog.waitIndexer(from, p.n)
	after := functionStats(b.env.Runner, searchIndexer)
	p.records, p.invocations = after.Records-before.Records, after.Invocations-before.Invocations
	fmt.Printf("  search: %d changes at %.0f/s: %.2f bulk requests per 1,000\n", p.n, p.achieved, perThousand(p.batches.requests(), p.batches.documents()))
	return nil
}

// lagLimit is how long after its write a probe is looked for.
const lagLimit = 30 * time.Second

// lag writes through the objects API at 20 a second (60 s at scale 1),
// each write a new version of a loaded object holding a word of its own
// and the run's probe word, and times each from the PUT sent to the first
// search that finds it.
func (b *searchBench) lag(ctx context.Context) error {
	const rate = 20.0
	dur := max(time.Duration(float64(time.Minute)*b.scale), 15*time.Second)
	n := min(int(rate*dur.Seconds()), len(b.recs))
	tag := "probe" + letters(int(time.Now().UnixNano()%1e6))
	b.probes = make([]lagProbe, n)
	for i := range b.probes {
		b.probes[i] = lagProbe{key: b.recs[i].Key, word: tag + "x" + letters(i)}
	}
	w := &lagWatch{b: b, tag: tag, pending: map[int]int64{}, done: make(chan struct{})}
	b.lagBegan = time.Now()
	var watcher sync.WaitGroup
	watcher.Go(func() { w.run(ctx) })
	var puts sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range b.probes {
		at := b.lagBegan.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(at)):
		}
		sem <- struct{}{}
		puts.Go(func() {
			defer func() { <-sem }()
			b.put(ctx, w, i, tag)
		})
	}
	puts.Wait()
	close(w.done)
	watcher.Wait()
	if w.err != nil {
		return w.err
	}
	b.lagLooks = w.looks
	b.lagFailed, b.lagFailure = w.failed, w.firstFailure
	found := lagSeconds(b.probes)
	fmt.Printf("  search: %d writes, %d found; lag p50 %.2f s, p99 %.2f s (a look p50 %.3f s, %d looks)\n", n, len(found), percentile(found, 50), percentile(found, 99), percentile(w.looks, 50), len(w.looks))
	return b.confirmWords(ctx)
}

// put writes probe i and hands it to the watch.
func (b *searchBench) put(ctx context.Context, w *lagWatch, i int, tag string) {
	p := &b.probes[i]
	body := fmt.Appendf(nil, "searchbench %s %d: %s", tag, i, p.word)
	p.sent = time.Now()
	m, err := b.client.Put(ctx, p.key, body, objectsclient.PutOptions{ContentType: "text/plain"})
	if err != nil {
		p.err = err
		return
	}
	r := &b.recs[i]
	r.Version, r.Data, r.Size = m.Version, body, int64(len(body))
	w.add(i, m.Version)
}

// confirmWords searches a sample of the probes by their own word once the
// run is over: each must be found, alone.
func (b *searchBench) confirmWords(ctx context.Context) error {
	step := max(len(b.probes)/lagWordSample, 1)
	for i := 0; i < len(b.probes); i += step {
		f, err := b.engine.Find(ctx, search.Plan{Terms: []string{b.probes[i].word}, Limit: 2})
		if err != nil {
			return fmt.Errorf("lag: %w", err)
		}
		b.wordsChecked++
		if f.Total == 1 && len(f.Hits) == 1 && f.Hits[0].Key == b.probes[i].key {
			b.wordsFound++
		}
	}
	return nil
}

// lagWordSample is how many probes are searched by their own word.
const lagWordSample = 20

// lagWatch finds the probes as they become searchable: every 50 ms one
// search for the run's probe word among the documents modified since the
// oldest probe not yet found. A hit at the version written is that
// version's text, searchable. One search a tick, not one per probe: on two
// cores, polling each probe's own word would slow the engine it measures.
type lagWatch struct {
	b       *searchBench
	tag     string
	mu      sync.Mutex
	pending map[int]int64 // probe → the version written
	done    chan struct{} // closed once every probe was written
	looks   []float64     // each tick's search time, seconds
	// Searches the engine failed, and the first one's error.
	failed       int
	firstFailure string
	err          error
}

func (w *lagWatch) add(i int, version int64) {
	w.mu.Lock()
	w.pending[i] = version
	w.mu.Unlock()
}

func (w *lagWatch) run(ctx context.Context) {
	var closedAt time.Time
	byKey := map[string]int{}
	for i, p := range w.b.probes {
		byKey[p.key] = i
	}
	for {
		select {
		case <-ctx.Done():
			w.err = ctx.Err()
			return
		case <-w.done:
			if closedAt.IsZero() {
				closedAt = time.Now()
			}
		case <-time.After(50 * time.Millisecond):
		}
		w.mu.Lock()
		left := len(w.pending)
		var oldest time.Time
		for i := range w.pending {
			if s := w.b.probes[i].sent; oldest.IsZero() || s.Before(oldest) {
				oldest = s
			}
		}
		w.mu.Unlock()
		if !closedAt.IsZero() && (left == 0 || time.Since(closedAt) > lagLimit) {
			return
		}
		if left == 0 {
			continue
		}
		if err := w.look(ctx, oldest, byKey); err != nil {
			w.err = err
			return
		}
	}
}

// look runs one tick's search and marks the probes it finds, found when
// the search was sent: a search sent then finds them (the one before,
// sent a look earlier, had not).
func (w *lagWatch) look(ctx context.Context, since time.Time, byKey map[string]int) error {
	sent := time.Now()
	// No key prefix: every document is under the run's, and a prefix
	// filter over a keyword field costs the engine a term per key.
	f, err := w.b.engine.Find(ctx, search.Plan{Terms: []string{w.tag}, Since: since.Add(-time.Second), Limit: 500})
	if err != nil {
		// The engine failed this search: counted, and looked again next tick.
		w.failed++
		if w.firstFailure == "" {
			w.firstFailure = err.Error()
		}
		return nil
	}
	w.looks = append(w.looks, time.Since(sent).Seconds())
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range f.Hits {
		i, ok := byKey[h.Key]
		if !ok {
			continue
		}
		if version, pending := w.pending[i]; pending && h.Version >= version {
			delete(w.pending, i)
			w.b.probes[i].found = sent
		}
	}
	return nil
}

// letters writes n in base 26 with the letters a to z: a word the
// engine's tokenizer keeps whole.
func letters(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('a' + n%26)}, b...)
		n /= 26
		if n == 0 {
			return string(b)
		}
	}
}
