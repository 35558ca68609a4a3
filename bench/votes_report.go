package main

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// reportAtAWS writes the runs at AWS's 1,000 units per key (the naive
// run, then ddbpipe's).
func reportAtAWS(s *section, runs [2]runStats, fl flood) {
	L, n := awsKeyLimit(), runs[0].n
	s.printf("### At AWS's partition limit: %.0f write units per second per key\n\n"+
		"%d votes, %s, the proxy enforcing %.0f write units per second per partition key.\n\n", L, n, fl.label, L)
	runTable(s, runs[:])
	naiveRun, oursRun := runs[0], runs[1]
	s.printf("\nddbpipe end to end: **%.1f×** the naive consumer (counting: %.1f×).\n", oursRun.vps()/naiveRun.vps(), oursRun.cvps()/naiveRun.cvps())

	s.printf("\nWhat bounds each run on this machine (%d CPUs, shared by DynamoDB Local, the proxies and the stack's functions):\n\n"+
		"- the naive consumer %s;\n- ddbpipe's counter %s.\n", runtime.NumCPU(), bound(naiveRun, L), bound(oursRun, float64(votes.LedgerSuffixes)*L))
	if naiveRun.keys.throttled == 0 && oursRun.keys.throttled == 0 {
		s.printf("\nThe ratio is then the emulator's, not the partitions'.\n")
	}
	s.printf("\nOn AWS the bound is %.0f write units per second per partition key. The naive counter's one key allows %.0f votes/s.\n"+
		"ddbpipe's ledger spreads a poll over %d keys at 1 unit per put: %.0f votes/s per poll. The counters take about 2 units\n"+
		"per counter key per tally batch, one key per option in a batch (here %.2f counter units per vote at %.0f votes per\n"+
		"tally batch), so the poll's counter keys stay far under their bound. The scaled runs below measure the partitions.\n",
		L, L, votes.LedgerSuffixes, float64(votes.LedgerSuffixes)*L, oursRun.per(oursRun.keys.counters), oursRun.tally.votesPerBatch())
	s.charts = append(s.charts, unitsChart(runs))
}

// bound says what bound a run's writes: its keys' limit (ceiling units per
// second in all) when the proxy refused some of them, else DynamoDB Local.
func bound(r runStats, ceiling float64) string {
	if r.keys.throttled > 0 {
		return fmt.Sprintf("wrote %.0f units/s with %d writes refused by the key limit: its keys (%.0f units/s in all) bound it",
			r.writeRate(), r.keys.throttled, ceiling)
	}
	return fmt.Sprintf("wrote %.0f units/s with no write refused, under the %.0f units/s its keys allow: the emulator bound it",
		r.writeRate(), ceiling)
}

// votesPerBatch is the votes counted per tally batch.
func (t tallyFigures) votesPerBatch() float64 { return t.counted / float64(max(t.batches, 1)) }

// runColumns are the columns of a run: speed, units per vote by kind,
// what was throttled, failed back or delivered again, and how long the
// counters took to catch up.
const runColumns = "votes/s end to end | votes/s counting | end to end | counting | consumer's write units/s, first invocation to last | " +
	"write units per vote: ledger + counters + checkpoints = total | writes refused by the key limit | " +
	"messages failed back | messages delivered again | tally batches (votes per batch) | caught up after the last vote"

func runCells(r runStats) string {
	failed, batches := "–", "–" // the naive consumer has no tally and fails nothing back
	if r.consumer == oursLabel {
		failed = fmt.Sprintf("%.0f", r.failedBack)
		batches = fmt.Sprintf("%d (%.0f)", r.tally.batches, r.tally.votesPerBatch())
	}
	return fmt.Sprintf("%.0f | %.0f | %s | %s | %.0f | %.3f + %.3f + %.3f = **%.3f** | %d | %s | %d | %s | %s",
		r.vps(), r.cvps(), r.took.Round(100*time.Millisecond), r.counting.Round(100*time.Millisecond), r.writeRate(),
		r.per(r.keys.ledger), r.per(r.keys.counters), r.per(r.keys.checkpoints), r.unitsPerVote(),
		r.keys.throttled, failed, r.redelivered(), batches, r.caughtUp.Round(10*time.Millisecond))
}

func runTable(s *section, runs []runStats) {
	s.printf("| consumer | %s |\n|---|%s\n", runColumns, strings.Repeat("---:|", 11))
	for _, r := range runs {
		s.printf("| %s | %s |\n", r.consumer, runCells(r))
	}
}

// unitsChart draws the write units per vote of each consumer, by kind.
func unitsChart(runs [2]runStats) pngchart.Chart {
	c := pngchart.Chart{Title: "write units per vote, ten-option spread at AWS's limit", Unit: "units"}
	c.Bars = append(c.Bars, pngchart.Bar{Label: "naive: its counter", Value: runs[0].unitsPerVote()})
	o := runs[1]
	c.Bars = append(c.Bars,
		pngchart.Bar{Label: "ddbpipe: ledger", Value: o.per(o.keys.ledger)},
		pngchart.Bar{Label: "ddbpipe: counters", Value: o.per(o.keys.counters)},
		pngchart.Bar{Label: "ddbpipe: checkpoints", Value: o.per(o.keys.checkpoints)},
		pngchart.Bar{Label: "ddbpipe: total", Value: o.unitsPerVote()})
	return c
}

// scaledReport writes the scaled runs: the model, each run, the ratios.
func scaledReport(s *section, sc *scaledRuns, d deployment) {
	L, n := sc.limit, sc.n
	ledgerCeiling := float64(votes.LedgerSuffixes) * L
	s.printf("\n### At scaled partition limits: %.0f write units per second per key\n\n", L)
	s.printf("The proxy's limit is scaled down %.0f× to %.0f write units per second per partition key (`-key-limit`,\n"+
		"`make bench KEY_LIMIT=…`): the naive counter's one item then allows %.0f votes/s, ddbpipe's ledger %.0f votes/s\n"+
		"(%d keys × %.0f units, 1 unit per put). ", awsKeyLimit()/L, L, L, ledgerCeiling, votes.LedgerSuffixes, L)
	s.printf("Each flood is %d votes (the same voters and options for both consumers), queued first. The hot flood\n"+
		"(every vote for one option) runs %d times, each a naive run then a ddbpipe run; the spread once.\n\n", n, len(sc.hot))
	s.printf("| flood | run | consumer | %s |\n|---|---:|---|%s\n", runColumns, strings.Repeat("---:|", 11))
	row := func(label string, i int, r runStats) {
		s.printf("| %s | %d | %s | %s |\n", label, i, r.consumer, runCells(r))
	}
	for i, p := range sc.hot {
		row("one hot option", i+1, p[0])
		row("one hot option", i+1, p[1])
	}
	row("ten-option spread", 1, sc.spread[0])
	row("ten-option spread", 1, sc.spread[1])

	// The end-to-end ceiling at this n: both pay the batching window; the
	// naive consumer then writes at L, ddbpipe at the ledger's ceiling, each
	// key's bucket starting full (one second of its limit).
	w := d.window.Seconds()
	naiveBest := w + (float64(n)-L)/L
	oursBest := w + max(float64(n)-ledgerCeiling, 0)/ledgerCeiling
	scaledBounds(s, sc, ledgerCeiling)
	s.printf("\n| flood | run | ddbpipe ÷ naive, end to end | counting | messages failed back by ddbpipe |\n|---|---:|---:|---:|---:|\n")
	// The chart's font is ASCII only.
	ratios := pngchart.Chart{Title: fmt.Sprintf("ddbpipe / naive at %.0f write units/s per key, end to end", L), Unit: "x"}
	for i, p := range sc.hot {
		s.printf("| one hot option | %d | **%.1f×** | %.1f× | %.0f |\n", i+1, ratio(p), countingRatio(p), p[1].failedBack)
		ratios.Bars = append(ratios.Bars, pngchart.Bar{Label: fmt.Sprintf("hot option, run %d", i+1), Value: ratio(p)})
	}
	s.printf("| ten-option spread | 1 | **%.1f×** | %.1f× | %.0f |\n", ratio(sc.spread), countingRatio(sc.spread), sc.spread[1].failedBack)
	ratios.Bars = append(ratios.Bars, pngchart.Bar{Label: "ten-option spread", Value: ratio(sc.spread)})
	s.printf("\nThe partitions' ratio is %.0f× (%d ledger keys against one counter item). End to end over %d votes it cannot\n"+
		"exceed about %.1f×: both consumers first wait out the %.0f s batching window, then the naive one needs about %.1f s\n"+
		"at %.0f votes/s (its key's first second is free) and ddbpipe about %.1f s at %.0f, before the tally's lag; the\n"+
		"counting ratio leaves the window out.\n",
		ledgerCeiling/L, votes.LedgerSuffixes, n, naiveBest/oursBest, w, naiveBest-w, L, oursBest-w, ledgerCeiling)
	s.printf("\nWhat would differ on AWS: every rate ×%.0f, so the fixed costs (the first batching window, the tally's batching\n"+
		"window) weigh that much less against the writing; a new on-demand table (each month's ledger is one) serves about\n"+
		"4,000 write units per second until DynamoDB has scaled it (or it is pre-warmed with warm throughput); and a poll's\n"+
		"ledger keys may share a physical partition until DynamoDB splits it for heat, which this per-key model does not show.\n",
		awsKeyLimit()/L)
	rates := pngchart.Chart{Title: fmt.Sprintf("votes/s end to end at %.0f write units/s per key", L), Unit: "votes/s"}
	for i, p := range sc.hot {
		rates.Bars = append(rates.Bars,
			pngchart.Bar{Label: fmt.Sprintf("hot, run %d: naive", i+1), Value: p[0].vps()},
			pngchart.Bar{Label: fmt.Sprintf("hot, run %d: ddbpipe", i+1), Value: p[1].vps()})
	}
	rates.Bars = append(rates.Bars,
		pngchart.Bar{Label: "spread: naive", Value: sc.spread[0].vps()},
		pngchart.Bar{Label: "spread: ddbpipe", Value: sc.spread[1].vps()})
	s.charts = append(s.charts, rates, ratios)
}

// scaledBounds says, from the writes the key limit refused, which scaled
// runs their keys bound and at what pace the others wrote.
func scaledBounds(s *section, sc *scaledRuns, ledgerCeiling float64) {
	var naiveBound, naiveRuns, oursBound, oursRuns int
	var free []float64 // ddbpipe's write rates in runs its keys did not bind
	for _, r := range sc.runs() {
		switch {
		case r.consumer == naiveLabel:
			naiveRuns++
			if r.keys.throttled > 0 {
				naiveBound++
			}
		case r.consumer == oursLabel:
			oursRuns++
			if r.keys.throttled > 0 {
				oursBound++
			} else {
				free = append(free, r.writeRate())
			}
		}
	}
	s.printf("\nThe key limit refused the naive consumer's writes in %d of its %d runs, ddbpipe's in %d of its %d.", naiveBound, naiveRuns, oursBound, oursRuns)
	if len(free) > 0 {
		s.printf(" Where it refused none of ddbpipe's, the emulator bound it: its ledger took %.0f to %.0f units/s, under the\n"+
			"%.0f its keys allow (each key's bucket starts full, one second of its limit, so a short flood may never drain it).",
			slices.Min(free), slices.Max(free), ledgerCeiling)
	}
	s.printf("\n")
}

// staleness writes how far ddbpipe's counters trail its ledger: the
// tally's own lag per batch and, per run, the time from the last vote
// written to the first read showing every vote.
func staleness(s *section, runs []runStats) {
	var lags, caught []float64
	var t tallyFigures
	written := 0
	for _, r := range runs {
		written += r.n
		lags = append(lags, r.tally.lags...)
		caught = append(caught, r.caughtUp.Seconds())
		t.batches += r.tally.batches
		t.counted += r.tally.counted
		t.commits += r.tally.commits
		t.moved += r.tally.moved
		t.throttles += r.tally.throttles
		t.replayed += r.tally.replayed
	}
	s.printf("\n### Staleness of the counters\n\n"+
		"Votes are written to the ledger first and counted by the tally from its stream. Over ddbpipe's %d runs above:\n\n"+
		"| measure | samples | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n", len(runs))
	s.printf("| TallyLag (the tally's EMF, per batch: the newest vote's ledger write to its commit) | %d batches | %.2f s | %.2f s | %.2f s |\n",
		len(lags), percentile(lags, 50), percentile(lags, 99), percentile(lags, 100))
	s.printf("| caught up: the counter's last invocation's end to the first `votes.Results` read showing every vote | %d runs | %.2f s | %.2f s | %.2f s |\n\n",
		len(caught), percentile(caught, 50), percentile(caught, 99), percentile(caught, 100))
	s.printf("TallyLag is the lag of the newest vote of each commit: a batch's earliest votes waited up to the tally's batching\n" +
		"window longer. The caught-up time is read every 100 ms, so it is up to 0.1 s late; with few runs, p99 is their maximum.\n")
	s.printf("\nThe tally's EMF over those runs: %d batches counted %.0f votes (the runs wrote %d) in %.0f commits; %.0f commits\n"+
		"found their checkpoint moved, %.0f were throttled, and %.0f records delivered again were skipped as counted already.\n",
		t.batches, t.counted, written, t.commits, t.moved, t.throttles, t.replayed)
}

// votesGoals writes the goals with the measured figures.
func votesGoals(s *section, runs []runStats, cost usdPerMillion, awsPaced [2]usdPerMillion, sc *scaledRuns) {
	worstUnits := 0.0
	for _, r := range runs {
		worstUnits = max(worstUnits, r.unitsPerVote())
	}
	var caught []float64
	for _, r := range runs {
		caught = append(caught, r.caughtUp.Seconds())
	}
	p99 := percentile(caught, 99)
	s.printf("\n### Goals\n\n| goal | measured | verdict |\n|---|---|---|\n")
	s.printf("| write units per vote (ledger + counters + checkpoints) ≤ %.1f | %.3f at most, over ddbpipe's %d runs | %s |\n",
		goalUnitsPerVote, worstUnits, len(runs), verdict(worstUnits <= goalUnitsPerVote))
	s.printf("| ≤ $%.2f per million votes | $%.3f modelled (DynamoDB $%.3f + SQS $%.3f + Lambda $%.3f at DynamoDB Local's pace), ten-option spread at AWS's limit | %s |\n",
		goalUSDPerMillion, cost.total(), cost.dynamodb, cost.sqs, cost.lambda, verdict(cost.total() <= goalUSDPerMillion))
	costRatio := awsPaced[1].total() / awsPaced[0].total()
	s.printf("| cost per million votes ≤ %.2f × the naive consumer's, Lambda at AWS's latencies | %.2f× ($%.3f against $%.3f) | %s |\n",
		goalCostRatio, costRatio, awsPaced[1].total(), awsPaced[0].total(), verdict(costRatio <= goalCostRatio))
	switch {
	case sc == nil:
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | not measured (`-key-limit 0`) | – |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns)
	case sc.limit != goalHotKeyLimit:
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | not measured at %d (ran at %.0f) | – |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns, goalHotKeyLimit, sc.limit)
	default:
		minRatio, failed := math.Inf(1), 0.0
		var each []string
		for _, p := range sc.hot {
			minRatio = min(minRatio, ratio(p))
			failed += p[1].failedBack
			each = append(each, fmt.Sprintf("%.1f×", ratio(p)))
		}
		s.printf("| at %d write units per key, ddbpipe ≥ %.0f× the naive consumer end to end on the hot flood, nothing failed back in %d consecutive runs | %s (lowest %.1f×); %.0f messages failed back in all | %s |\n",
			goalHotKeyLimit, goalHotRatio, goalHotRuns, strings.Join(each, ", "), minRatio, failed, verdict(minRatio >= goalHotRatio && failed == 0))
	}
	s.printf("| counters caught up ≤ %.0f s (p99) after the last vote | p99 %.2f s over %d runs | %s |\n",
		goalCaughtUp, p99, len(caught), verdict(p99 <= goalCaughtUp))
	if cost.total() > goalUSDPerMillion && cost.dynamodb+cost.sqs <= goalUSDPerMillion {
		s.printf("\nThe cost goal fails on Lambda's share, which here is the emulator's queueing (see the cost): DynamoDB and SQS,\n"+
			"what AWS bills for the requests counted, come to $%.3f of the $%.2f.\n", cost.dynamodb+cost.sqs, goalUSDPerMillion)
	}
	if sc != nil && sc.limit == goalHotKeyLimit {
		hotShortfall(s, sc)
	}
}

// hotShortfall says, when the hot flood's ratio falls short of the goal,
// what the goal would take in these runs: ddbpipe end to end in a
// goalHotRatio-th of the naive consumer's time, the batching window
// included, and a ledger at goalHotRatio × the key limit.
func hotShortfall(s *section, sc *scaledRuns) {
	var naiveTook, oursTook time.Duration
	var fastest float64
	var refused int64
	for _, p := range sc.hot {
		naiveTook += p[0].took
		oursTook += p[1].took
		fastest = max(fastest, p[1].writeRate())
		refused += p[1].keys.throttled
	}
	runs := time.Duration(len(sc.hot))
	naiveTook, oursTook = naiveTook/runs, oursTook/runs
	if float64(naiveTook)/float64(oursTook) >= goalHotRatio {
		return
	}
	s.printf("\nThe hot flood's goal would take ddbpipe %s end to end here (the naive consumer's %s ÷ %.0f), against %s on\n"+
		"average, the counter's batching window included; and a ledger written at %.0f × %.0f = %.0f units/s, against at most\n"+
		"%.0f units/s in these runs",
		(naiveTook / time.Duration(goalHotRatio)).Round(100*time.Millisecond), naiveTook.Round(100*time.Millisecond), goalHotRatio,
		oursTook.Round(100*time.Millisecond), goalHotRatio, sc.limit, goalHotRatio*sc.limit, fastest)
	if refused == 0 {
		s.printf(", where no key refused a write: this machine's DynamoDB Local, not the partitions, falls short.\n")
	} else {
		s.printf(", with %d writes refused by the key limit.\n", refused)
	}
}

// anomalies writes what a healthy run shows none of: a count above the
// votes sent (a vote counted twice), and warnings or errors the stack's
// functions logged while the section ran.
func anomalies(s *section, since time.Time, runs []runStats) {
	exact := true
	for _, r := range runs {
		if r.total != int64(r.n) {
			exact = false
			s.printf("\n**%s (%s, %d votes) counted %d.**\n", r.consumer, r.flood, r.n, r.total)
		}
	}
	if exact {
		s.printf("\nEvery run counted exactly the votes it sent.\n")
	}
	w := stackLog.warningsSince(since)
	if len(w) == 0 {
		s.printf("\nThe stack's functions logged no warning or error during these runs.\n")
		return
	}
	s.printf("\nThe stack's functions logged these warnings and errors during these runs:\n\n| function: message | times |\n|---|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(w)) {
		s.printf("| %s | %d |\n", k, w[k])
	}
}
