package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
)

// timeline holds one sample a second: cumulative votes counted and sent,
// and faults injected by the proxies.
type timeline struct {
	began   time.Time
	mu      sync.Mutex
	counted []float64
	sent    []float64
	faults  []float64
}

func newTimeline(began time.Time) *timeline { return &timeline{began: began} }

// sample reads the counters every second, straight from DynamoDB Local
// (not through the faulty proxy: the measurement is not part of the load).
func (s *soak) sample(ctx context.Context) {
	cfg, err := awsenv.FromVars(ctx, func(k string) string { return s.servers.Vars()[k] })
	if err != nil {
		return
	}
	store := votesddb.New(awsenv.DynamoDB(cfg), s.env.Vars["COUNTERS_TABLE_NAME"], s.env.Vars["LEDGER_TABLE_PREFIX"])
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last float64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		total := 0.0
		ok := true
		for poll := range polls {
			r, err := votes.Results(ctx, store, poll, time.Now)
			if err != nil {
				ok = false
				break
			}
			total += float64(r.Total)
		}
		if !ok {
			total = last
		}
		last = total
		var faults int64
		for _, p := range s.env.Proxies {
			c := p.Stats().Counts
			faults += c.Throttled + c.ServerErrors + c.Dropped + c.UpstreamErrors
		}
		s.samples.mu.Lock()
		s.samples.counted = append(s.samples.counted, total)
		s.samples.sent = append(s.samples.sent, float64(s.load.votesSent()))
		s.samples.faults = append(s.samples.faults, float64(faults))
		s.samples.mu.Unlock()
	}
}

func rates(cum []float64) []float64 {
	out := make([]float64, len(cum))
	for i := range cum {
		if i > 0 {
			out[i] = max(0, cum[i]-cum[i-1])
		}
	}
	return out
}

// writePNG draws the timeline: votes counted and sent, object operations
// and faults per second, with kills, the restart and the month boundary.
func (r *Result) writePNG(path string, objectsPerSec []int) error {
	tl := r.Timeline
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ops := make([]float64, len(tl.counted))
	for i := range ops {
		if i < len(objectsPerSec) {
			ops[i] = float64(objectsPerSec[i])
		}
	}
	chart := pngchart.Timeline{Title: fmt.Sprintf("ddbpipe soak: %s of load", r.Config.Duration), XUnit: "s",
		Series: []pngchart.Series{
			{Name: "votes counted", Unit: "votes/s", Values: rates(tl.counted)},
			{Name: "votes sent", Unit: "votes/s", Values: rates(tl.sent)},
			{Name: "object operations", Unit: "requests/s", Values: ops},
			{Name: "faults injected by the proxies", Unit: "/s", Values: rates(tl.faults)},
		}}
	for _, e := range r.Faults.Events {
		if e.Kind == "phase" {
			continue
		}
		chart.Marks = append(chart.Marks, pngchart.Mark{At: e.At.Seconds(), Kind: e.Kind})
	}
	chart.Marks = append(chart.Marks, pngchart.Mark{At: r.Crossing.Seconds(), Kind: "month boundary"})
	for _, rot := range r.Rotations {
		for _, t := range rot.Retired {
			if t != "" {
				chart.Marks = append(chart.Marks, pngchart.Mark{At: rot.At.Seconds(), Kind: "month retired"})
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return chart.WritePNG(f)
}

// Write puts report.md and timeline.png in dir.
func (r *Result) Write(dir string, objectsPerSec []int, corpus string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	png := filepath.Join(dir, "timeline.png")
	pngErr := r.writePNG(png, objectsPerSec)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	verdict := "**0 invariant violations**"
	if n := r.Violations(); n > 0 {
		verdict = fmt.Sprintf("**%d invariant violations**", n)
	}
	p("# ddbpipe soak\n\n%s. %s of load (`-duration`), then the drain (%s) and the checks; %s in all. Seed %d.\n\n",
		verdict, r.Config.Duration, r.Drained.Round(time.Second), r.Took.Round(time.Second), r.Config.Seed)
	p("All three flows ran at once on one local stack: the counter, the tally, the archiver, the objects API and the reaper in processes of their own\n" +
		"behind a Lambda Runtime API (killed with SIGKILL in turn), the other functions in the runner; every AWS call through the fault proxies.\n\n")
	if c := r.Config; c.StreamShards > 1 || c.Conflicts {
		p("As on AWS: every DynamoDB stream in %d shards (`-stream-shards`), each splitting in two after %d records (`-stream-split-after`, 0: never), one reader per shard at once; transaction conflicts %s (`-conflicts`).\n\n",
			max(c.StreamShards, 1), c.StreamSplitAfter, map[bool]string{true: "on", false: "off"}[c.Conflicts])
	}

	p("## Invariants\n\n| invariant | holds | figures |\n|---|---|---|\n")
	for _, i := range r.Invariants {
		mark := "yes"
		if !i.OK {
			mark = "**NO**"
		}
		p("| %s | %s | %s |\n", i.Name, mark, strings.ReplaceAll(i.Figures, "|", "/"))
	}

	r.writeLoad(p)
	r.writeFaults(p)
	p("\n## Functions\n\n| function | invocations | errors | records | duplicates |\n|---|---|---|---|---|\n")
	for _, s := range r.Functions {
		p("| %s | %d | %d | %d | %d |\n", s.Function, s.Invocations, s.Errors, s.Records, s.Duplicates)
	}
	if j := r.Judge; j.Requests > 0 {
		p("\n## IAM judge\n\n%d requests judged (every call but the admin's setup and checks): p50 %s, p99 %s, max %s; %d answered from the decision cache, %d asked the evaluator (p99 %s).\n",
			j.Requests, j.P50.Round(time.Microsecond), j.P99.Round(time.Microsecond), j.Max.Round(time.Microsecond), j.Cached, j.Asked, j.AskedP99.Round(time.Microsecond))
	} else {
		p("\n## IAM judge\n\nEnforcement was off (`DDBPIPE_ENFORCE_IAM=0`): no call was judged.\n")
	}
	if r.Fuzz != "" {
		p("\n## Fuzzing\n\nThe fuzz targets, run by `make soak` before the load (`SOAK_FUZZTIME` each):\n\n```\n%s```\n", r.Fuzz)
	}
	if corpus != "" {
		p("\n## Bad-input corpus\n\n%s\n", corpus)
	}
	if pngErr == nil {
		p("\n## Timeline\n\n![throughput and faults over time](timeline.png)\n")
	} else {
		p("\n(no timeline: %v)\n", pngErr)
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644)
}

// writeLoad writes the report's "Load held": votes, documents, and the
// clocks' crossing with the rotator's runs.
func (r *Result) writeLoad(p func(format string, args ...any)) {
	l := r.Load
	p("\n## Load held\n\n")
	p("- Votes: %d sends (%.1f/s, invalid messages included), %d distinct accepted, %d sent again on purpose (same voteId), %d sent again after a failed send, %d invalid messages.\n",
		l.VotesSent, l.VotesPerSecond, l.DistinctAccepted, l.Resent, l.Retried, l.Bad)
	if z := r.Sizing; z.Ceiling > 0 {
		p("- Sized from the store's ceiling, measured before the load: %.0f puts/s by a plain loader (%d writers, the counter's invocations × 16 puts each) into a scratch table of the ledger's shape, its stream on. Steady votes %.0f/s (%.2f × the ceiling, `-steady`); %d bursts of %.0f/s for %s each (%.2f × the ceiling, `-burst`, `-bursts`, `-burst-for`).\n",
			z.Ceiling, z.Writers, z.Steady, r.Config.SteadyShare, r.Config.Bursts, z.Burst, r.Config.BurstFor, r.Config.BurstShare)
	} else {
		p("- Votes at a fixed %.0f/s (`-rate`), no bursts.\n", z.Steady)
	}
	p("- Documents: %.1f requests/s (paced at %g/s, `-object-rate`) by %d object and %d shared workers: %s.\n", l.ObjectsPerSecond, r.Config.ObjectsPerSecond, r.Config.ObjectWorkers, r.Config.SharedWorkers, counts(l.ObjectOps))
	p("- Placements of the documents written: %s.\n", counts(l.Placements))
	p("- Every clock (the producers' and the functions') crossed from %s into %s at %s and jumped past %s's grace at %s; the rotator ran %d times:\n\n",
		coldMonth, liveMonth, r.Crossing.Round(time.Second), coldMonth, (r.Crossing + r.Config.Duration/20).Round(time.Second), len(r.Rotations))
	p("| started at | rotator clock | why | created | outcomes | took | error |\n|---|---|---|---|---|---|---|\n")
	for _, rot := range r.Rotations {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", rot.At.Round(time.Second), rot.Clock.Format("2006-01-02 15:04"), rot.Why,
			strings.Join(rot.Created, ", "), counts(rot.Outcome), rot.Took.Round(10*time.Millisecond), short(rot.Err))
	}

}

// writeFaults writes the report's "Faults injected".
func (r *Result) writeFaults(p func(format string, args ...any)) {
	f := r.Faults
	p("\n## Faults injected\n\n| kind | count |\n|---|---|\n")
	for _, svc := range sortedKeys(f.Proxy) {
		c := f.Proxy[svc]
		p("| %s: throttling errors | %d |\n| %s: 500/503 errors | %d |\n| %s: connections dropped | %d |\n| %s: requests the server did not answer (restart) | %d |\n",
			svc, c.Throttled, svc, c.ServerErrors, svc, c.Dropped, svc, c.UpstreamErrors)
	}
	p("| batches delivered twice (SQS and stream redelivery) | %d |\n", f.Duplicates)
	for _, id := range sortedKeys(f.Kills) {
		st := f.Crashed[id]
		p("| SIGKILL of %s's process | %d (%d cold starts, %d invocations ended by an exit) |\n", id, f.Kills[id], st.Started, st.Exited)
	}
	p("| kills that hit an invocation in flight | %d |\n", f.KillsBusy)
	p("| S3 server restarted | down %s |\n", f.S3Down.Round(time.Millisecond))
	p("| search engine restarted | down %s |\n", f.SearchDown.Round(time.Millisecond))
	p("\nFault mixes (each for `-phase`, in turn; the proxies apply them to every request of the functions, producers and rotator):\n")
	for _, k := range sortedKeys(f.Phases) {
		p("- %s: %s\n", k, f.Phases[k].Round(time.Second))
	}

}

func counts[V any](m map[string]V) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
