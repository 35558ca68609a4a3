package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchddb"
)

// report writes the section from what the steps measured.
func (b *searchBench) report() *section {
	s := &section{title: "Search: the objects table's stream into the index"}
	s.printf("The local stack's search: ZincSearch v0.4.10 behind the search proxy (OpenSearch's API and semantics), fed by\n"+
		"`SearchIndexerFunction` from the objects table's stream (the template's event source: BatchSize %d stream records,\n"+
		"a 1 s batching window). %d objects of %d bytes of text/plain on average, stored inline, under `%s`, were loaded\n"+
		"with BatchWriteItem as the two items a commit writes (v0 and v1: two stream records per change) in %s, the\n"+
		"indexer held (`Runner.Hold`) so their %d stream records waited as a backlog. The objects table's two other\n"+
		"stream readers (the reaper and the archiver) were held for the whole section: here they share two cores with\n"+
		"DynamoDB Local and ZincSearch, on AWS they run apart. Documents are counted through a search's total, polled\n"+
		"every 50 ms (the engine's `_count`) for every writer alike; ZincSearch serves a write after its WAL timer (250 ms\n"+
		"here), and answers a bulk request before that. The section loads %d objects at scale 1; the issue's reindex of\n"+
		"100,000 is `-scale 5` (about five times as long: at this machine's pace it does not fit ten minutes).\n"+
		"The machine's load average (other processes included) was %s when the section began and %s when it ended.\n\n",
		b.batch, b.n, b.meanBytes, b.run, b.loadTook.Round(time.Second), 2*b.n, 20000, b.loadBefore, loadAverage())
	cores := fmt.Sprintf("every one of the machine's %d cores", runtime.NumCPU())
	if searchCores > 0 {
		cores = fmt.Sprintf("%d of the machine's %d cores (GOMAXPROCS=%d)", searchCores, runtime.NumCPU(), searchCores)
	}
	s.printf("ZincSearch ran on %s, the bench's `-search-cores`. An OpenSearch domain runs on nodes of its own;\n"+
		"an engine on every core here would lose CPU to what feeds it (DynamoDB Local serving the stream, the functions,\n"+
		"this program), and the indexer's rate against the plain loader's would measure the shared machine, not the\n"+
		"indexer. The ceiling is the engine's on its share; `-search-cores 0` gives it every core.\n\n", cores)
	b.reportCeiling(s)
	b.reportRequests(s)
	b.reportReindex(s)
	b.reportLag(s)
	b.reportReplay(s)
	return s
}

func (b *searchBench) ceilingMean() (rate float64, took time.Duration) {
	for _, c := range b.ceilings {
		rate += c.rate
		took += c.took
	}
	n := len(b.ceilings)
	return rate / float64(n), took / time.Duration(n)
}

func (b *searchBench) reportCeiling(s *section) {
	d := b.drained
	s.printf("### Indexing rate against the engine's ceiling\n\n" +
		"| writer | documents | bulk requests | documents a request | first → last document counted | documents/s |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(label string, docs, requests int, span time.Duration, rate float64) {
		s.printf("| %s | %d | %d | %.0f | %s | %.0f |\n", label, docs, requests, float64(docs)/float64(max(requests, 1)), span.Round(10*time.Millisecond), rate)
	}
	c := b.ceilings
	row("plain loader, "+c[0].label, c[0].docs, c[0].requests, c[0].span, c[0].rate)
	row("**the indexer** on the backlog (stream → function → bulk)", b.n, int(d.batches.requests()), d.span, d.rate)
	row("plain loader, "+c[1].label, c[1].docs, c[1].requests, c[1].span, c[1].rate)
	ceiling, _ := b.ceilingMean()
	r := d.rate / ceiling
	s.printf("\nThe plain loader sends the indexer's documents (`search.DocumentOf` and the text) with `searchos.Engine.Bulk`, one\n"+
		"request at a time, into a fresh index of the same engine; it ran once before the indexer and once after, and the\n"+
		"ceiling is their mean, %.0f documents/s. The indexer took %s from its release to the last document counted\n"+
		"(%d stream records in %d invocations, which ran %s in all: the rest is the event source reading the stream;\n"+
		"%d batches failed). Goal ≥ 0.9 × the ceiling: %s (%.2f).\n\n",
		ceiling, d.took.Round(10*time.Millisecond), d.records, d.invocations, d.busy.Round(100*time.Millisecond), int(d.batches.failed()), verdict(r >= 0.9), r)
	chart := pngchart.Chart{Title: "search: documents indexed per second, indexer vs the engine's plain ceiling", Unit: "docs/s"}
	chart.Bars = append(chart.Bars,
		pngchart.Bar{Label: "plain loader, before", Value: c[0].rate},
		pngchart.Bar{Label: "the indexer (backlog)", Value: d.rate},
		pngchart.Bar{Label: "plain loader, after", Value: c[1].rate})
	s.charts = append(s.charts, chart)
}

func (b *searchBench) reportRequests(s *section) {
	d, p := b.drained, b.pacedRun
	backlog := perThousand(d.batches.requests(), d.batches.documents())
	paced := perThousand(p.batches.requests(), p.batches.documents())
	s.printf("### Bulk requests per 1,000 changes\n\n"+
		"| arrivals | changes | stream records | batches | bulk requests | requests per 1,000 changes | documents a batch |\n|---|---:|---:|---:|---:|---:|---:|\n"+
		"| the backlog above | %d | %d | %d | %.0f | %.2f | %.0f |\n"+
		"| %.0f changes/s (asked %.0f), for %s | %d | %d | %d | %.0f | %.2f | %.0f |\n\n",
		b.n, d.records, len(d.batches.lines), d.batches.requests(), backlog, d.batches.documents()/float64(max(len(d.batches.lines), 1)),
		p.achieved, p.target, time.Duration(float64(p.n)/p.achieved*float64(time.Second)).Round(100*time.Millisecond), p.n, p.records,
		len(p.batches.lines), p.batches.requests(), paced, p.batches.documents()/float64(max(len(p.batches.lines), 1)))
	oneEach := d.batches.requests() == float64(len(d.batches.lines)) && p.batches.requests() == float64(len(p.batches.lines))
	s.printf("A change is one object's new version: two stream records (v0 and the version's item), of which the indexer reads\n"+
		"v0. %s, so a full batch carries %d changes, and full batches make %.2f requests per 1,000 changes, as any\n"+
		"arrival rate that fills them does. The backlog's batches, in documents: %s (the first is what the held event source\n"+
		"had read when it was held). Counted from the indexer's EMF lines (`BulkRequests`). One bulk request per stream\n"+
		"batch: %s.\n\n",
		b.filterText(), b.perBatch, 1000/float64(b.perBatch), sizesText(d.batches.sizes()), yesNo(oneEach))
	goal := verdict(paced <= 2)
	if p.achieved < 0.9*p.target {
		goal = fmt.Sprintf("not measured at that rate; with full batches %s (%.2f)", verdict(backlog <= 2), backlog)
	}
	s.printf("Goal ≤ 2 requests per 1,000 changes at 1,000 changes/s: %s.\n\n"+
		"Written with BatchWriteItem, DynamoDB Local here took %.0f changes/s with the indexer reading its stream (%.0f\n"+
		"asked), so the paced row is measured at that rate, where the 1 s window closes on batches of about %.0f changes:\n"+
		"%.2f requests per 1,000. On the backlog, batches are full as they would be at 1,000 changes/s: %.2f (each partial\n"+
		"batch adds to the %.2f of full ones).\n\n",
		goal, p.achieved, p.target, p.batches.documents()/float64(max(len(p.batches.lines), 1)), paced, backlog, 1000/float64(b.perBatch))
}

// filterText says what the indexer's event source passes it.
func (b *searchBench) filterText() string {
	if b.filter == "" {
		return fmt.Sprintf("Its event source has no filter: it delivers both records, BatchSize %d records in a batch", b.batch)
	}
	return fmt.Sprintf("Its event source's filter (`%s`) drops the other before batching, BatchSize %d v0 records in a batch", b.filter, b.batch)
}

func (b *searchBench) reportReindex(s *section) {
	r := b.reindexed
	_, plainTook := b.ceilingMean()
	x := r.took.Seconds() / plainTook.Seconds()
	s.printf("### Reindex against the plain bulk load\n\n"+
		"| load of the %d documents | bulk requests | took | documents/s |\n|---|---:|---:|---:|\n", b.n)
	for _, c := range b.ceilings {
		s.printf("| plain loader, %s | %d | %s | %.0f |\n", c.label, c.requests, c.took.Round(10*time.Millisecond), float64(c.docs)/c.took.Seconds())
	}
	s.printf("| `search.Reindex` (parallel scan of the table, bulk, refresh, alias switch) | %d | %s | %.0f |\n",
		r.res.Requests, r.took.Round(10*time.Millisecond), float64(b.n)/r.took.Seconds())
	s.printf("| `search.Reindex`'s whole `Run`, the old index's linger and deletion included | %d | %s | %.0f |\n\n",
		r.res.Requests, r.whole.Round(10*time.Millisecond), float64(b.n)/r.whole.Seconds())
	s.printf("Times run from the first request to the last document counted through the index (the reindex: from `Run`,\n"+
		"its %s wait for every indexer to see the write alias included, to the switch of the aliases, which `Run` makes once\n"+
		"the engine counts every document in the new index; the old index is deleted after). The reindex read %d keys and wrote %d documents (%d already newer from the stream), in batches of %d\n"+
		"gathered from %d scan segments, one bulk request at a time. Goal ≤ 1.2 × the plain load: %s (%.2f × the plain loaders' mean, %s; %.2f without the wait).\n\n",
		r.settle, r.res.Scanned, r.res.Written, r.res.Newer, search.DefaultReindexBatch, searchddb.ScanSegments, verdict(x <= 1.2), x, plainTook.Round(10*time.Millisecond),
		(r.took-r.settle).Seconds()/plainTook.Seconds())
	s.printf("Searches through the objects API (one at a time, each for one loaded object by the number in its key) while it ran: %d, of which\n"+
		"%d failed and %d were empty; after the last document was written (the switch of the aliases and the old index's\n"+
		"deletion): %d, %d failed, %d empty. Goal 0 failed and 0 empty: %s.\n",
		r.searches, r.failed, r.empty, r.switchSearches, r.switchFailed, r.switchEmpty, verdict(r.failed+r.empty == 0 && r.searches > 0))
	ph := r.res
	s.printf("`Run`'s steps, each from the end of the one before: the wait for the indexers %s, the scan and its bulk requests %s,\n"+
		"the refresh (until the engine serves the last writes) %s, the switch %s, the wait before the old index's deletion and\n"+
		"the deletion %s. Scan, bulk and refresh took %.2f × the plain loaders' mean.\n\n",
		ph.Settled.Round(10*time.Millisecond), (ph.Loaded - ph.Settled).Round(10*time.Millisecond), (ph.Refreshed - ph.Loaded).Round(10*time.Millisecond),
		(ph.Switched - ph.Refreshed).Round(time.Millisecond), (ph.Elapsed - ph.Switched).Round(10*time.Millisecond),
		(ph.Refreshed-ph.Settled).Seconds()/plainTook.Seconds())
	s.printf("The scan and its bulk requests ran from %s to %s after `Run` began", r.settle, r.lastWrite.Sub(r.began).Round(time.Millisecond))
	if len(r.failures) == 0 {
		s.printf(".\n")
	} else {
		s.printf("; the first failed or empty answers, by when their search was sent:\n")
	}
	for _, f := range r.failures {
		s.printf("- `%s`\n", f)
	}
	s.printf("\n")
	chart := pngchart.Chart{Title: fmt.Sprintf("search: loading %d documents, reindex vs plain bulk load", b.n), Unit: "s"}
	for _, c := range b.ceilings {
		chart.Bars = append(chart.Bars, pngchart.Bar{Label: "plain, " + c.label, Value: c.took.Seconds()})
	}
	chart.Bars = append(chart.Bars, pngchart.Bar{Label: "reindex", Value: r.took.Seconds()})
	s.charts = append(s.charts, chart)
}

func (b *searchBench) reportLag(s *section) {
	found := lagSeconds(b.probes)
	failed, missing := 0, 0
	for _, p := range b.probes {
		switch {
		case p.err != nil:
			failed++
		case p.found.IsZero():
			missing++
		}
	}
	// A probe never found counts as later than any found.
	lags := append([]float64{}, found...)
	for range missing {
		lags = append(lags, math.Inf(1))
	}
	p99 := percentile(lags, 99)
	indexer := stackLog.indexerBetween(b.lagBegan, b.lagBegan.Add(time.Hour))
	var batchLags []float64
	for _, l := range indexer.lines {
		batchLags = append(batchLags, l.lagMs/1000)
	}
	s.printf("### Write → searchable\n\n"+
		"%d PUTs through the objects API at 20 a second, each a new version of a loaded object whose text holds a word of\n"+
		"its own and the run's probe word, timed from the PUT sent to the first search sent that finds the object at that\n"+
		"version. One search at a time, 50 ms apart, asks the engine for the probe word among the documents modified since\n"+
		"the oldest probe not yet found (a search per probe would load the engine it measures); each took p50 %s (%d\n"+
		"searches, %d failed by the engine and made again: %s), so a lag is known to within about that. After the run, %d\n"+
		"probes searched by their own word: %d found.\n\n"+
		"| PUTs | found | failed | not found in %s | p50 | p90 | p99 | max |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"+
		"| %d | %d | %d | %d | %s | %s | %s | %s |\n\n",
		len(b.probes), secs(percentile(b.lagLooks, 50)), len(b.lagLooks), b.lagFailed, quotedOrNone(b.lagFailure), b.wordsChecked, b.wordsFound, lagLimit, len(b.probes), len(found), failed, missing,
		secs(percentile(lags, 50)), secs(percentile(lags, 90)), secs(p99), secs(percentile(lags, 100)))
	s.printf("Goal p99 ≤ 2 s: %s (%s). The indexer's own lag over those batches (`IndexLag`: the version's write to its\n"+
		"bulk answered, %d batches): p50 %s, p99 %s.\n\n",
		verdict(p99 <= 2 && failed == 0 && b.wordsFound == b.wordsChecked), secs(p99), len(batchLags), secs(percentile(batchLags, 50)), secs(percentile(batchLags, 99)))
	p50, worst, sent := lagPerSecond(b.probes, b.lagBegan)
	if len(sent) >= 2 {
		s.timelines = append(s.timelines, pngchart.Timeline{Title: "search: write → searchable lag by second of the run", XUnit: "s",
			Series: []pngchart.Series{{Name: "lag p50", Unit: "s", Values: p50}, {Name: "lag max", Unit: "s", Values: worst}, {Name: "PUTs sent", Unit: "/s", Values: sent}}})
	}
}

func (b *searchBench) reportReplay(s *section) {
	p := b.replayed
	d := b.drift
	s.printf("### Replays move nothing back\n\n"+
		"After the runs above, the first %d records of the objects table's stream (%d changes: version 1 of the first\n"+
		"objects loaded, %d of them written again since by the lag run) went through the indexer's own code again\n"+
		"(`searchlambda.Indexer.Index`, in one batch), and %d deletes at version 1 of objects now at version 2 (a late\n"+
		"tombstone) through `searchos.Engine.Bulk` on the write alias.\n\n"+
		"| replay | sent | written | refused as older or equal |\n|---|---:|---:|---:|\n"+
		"| the stream's first batch | %d | %d | %d |\n"+
		"| late tombstones | %d | %d | %d |\n\n",
		p.records, p.changes, p.since, p.tombstones,
		p.changes, p.batch.Documents, p.batch.Newer,
		p.tombstones, p.tombstoneOut[search.Done], p.tombstoneOut[search.Newer])
	s.printf("Then `search.Verify` compared the table with the index key by key (%s): %d keys in the table, %d documents,\n"+
		"%d missing, %d extra, %d behind, %d ahead. Documents moved back: %d. Goal 0: %s. The index equals the table: %s.\n",
		p.verifyTook.Round(100*time.Millisecond), d.TableKeys, d.IndexDocs, len(d.Missing), len(d.Extra), len(d.Behind), len(d.Ahead),
		p.movedBack, verdict(p.movedBack == 0 && p.batch.Documents == 0 && p.tombstoneOut[search.Done] == 0), yesNo(d.None()))
}

// secs is seconds with two decimals; "> limit" for a lag never seen.
func secs(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "> " + lagLimit.String()
	}
	return fmt.Sprintf("%.2f s", v)
}

// sizesText lists batch sizes, or summarizes them when there are many.
func sizesText(sizes []int) string {
	if len(sizes) <= 12 {
		return strings.Trim(fmt.Sprint(sizes), "[]")
	}
	sorted := slices.Sorted(slices.Values(sizes))
	return fmt.Sprintf("%d batches, the smallest %d, median %d, largest %d; first %d, last %d",
		len(sizes), sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1], sizes[0], sizes[len(sizes)-1])
}

// loadAverage is the machine's 1-minute load average ("?" off Linux).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// quotedOrNone quotes an error, or says there was none.
func quotedOrNone(err string) string {
	if err == "" {
		return "none"
	}
	return "`" + err + "`"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
