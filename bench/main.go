// Command bench writes ddbpipe's benchmark report: a Markdown file with the
// figures and PNG charts, measured on the local stack. Each flow adds its
// sections; the foundation measures the stack and the runner themselves.
//
//	go run ./bench -out bench/out      (or: make bench)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/internal/pngchart"
	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/stack"
)

// section is one part of the report.
type section struct {
	title  string
	text   strings.Builder
	charts []pngchart.Chart
	// timelines are drawn after the charts: series over time.
	timelines []pngchart.Timeline
}

func (s *section) printf(format string, args ...any) { fmt.Fprintf(&s.text, format, args...) }

// bench is one benchmark: it measures against a running local stack.
type bench struct {
	name string
	// fresh: the benchmark starts on a local stack of its own, and those
	// after it share that stack until the next fresh one, so each flow
	// measures on servers that hold none of another flow's stream records
	// (DynamoDB Local keeps them 24 h) and run none of its stream readers.
	fresh bool
	// own: the benchmark starts and stops the stacks it needs (run gets
	// a nil env); the next one starts on a fresh stack.
	own bool
	run func(ctx context.Context, env *stack.Env, scale float64) (*section, error)
}

func benches() []bench {
	return []bench{
		{name: "functions", run: benchFunctions}, // binaries and init: builds, no load on the servers
		{name: "objects", run: benchObjects},
		{name: "objects-ranges", run: benchRanges},
		{name: "listing", run: benchListing},
		{name: "objects-retries", run: benchRetries},
		{name: "votes", fresh: true, run: benchVotes},
		{name: "votes-shards", own: true, run: benchShards},
		{name: "votes-overload", own: true, run: benchOverload},
		{name: "votes-ceiling", own: true, run: benchCeiling},
		{name: "votes-monthturn", own: true, run: benchMonthTurn},
		{name: "runner-sqs", fresh: true, run: benchSQS},
		{name: "proxy", run: benchProxy},
		{name: "runner-streams", run: benchStreams},
		{name: "archive", run: benchArchive},
		{name: "search", fresh: true, run: benchSearch},
	}
}

func main() {
	out := flag.String("out", "bench/out", "folder for report.md and the charts")
	scale := flag.Float64("scale", 1, "workload size factor (0.1 for a quick run)")
	only := flag.String("only", "", "run only the benchmarks whose names contain one of these comma-separated words (=name: that one alone)")
	flag.Float64Var(&scaledKeyLimit, "key-limit", scaledKeyLimit, "per-key write units per second of the votes benchmark's scaled runs, beside AWS's 1,000 (0: skip them)")
	flag.IntVar(&searchCores, "search-cores", searchCores, "cores the search engine may run on at once (its GOMAXPROCS; 0: every core)")
	flag.Parse()
	if err := run(context.Background(), *out, *scale, *only, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, scale float64, only string, log io.Writer) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	stacks := &section{title: "Local stack"}
	stacks.printf("Each flow's benchmarks run on a local stack of their own (see `fresh` in bench/main.go).\n\n" +
		"| stack, for | `stack.Up`: servers started, proxies, template provisioned, functions hosted | resources provisioned | servers' memory after start (RSS) | after its benchmarks (RSS) |\n|---|---:|---:|---:|---:|\n")
	sections := []*section{stacks}

	var env *stack.Env
	closeStack := func() {
		if env == nil {
			return
		}
		rss, _ := env.Servers.RSSBytes()
		stacks.printf(" %.0f MB |\n", float64(rss)/(1<<20))
		env.Close()
		env = nil
	}
	defer closeStack()
	for _, b := range benches() {
		if !selected(b.name, only) {
			continue
		}
		if b.own {
			closeStack()
			fmt.Fprintf(log, "bench %s…\n", b.name)
			s, err := b.run(ctx, nil, scale)
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			sections = append(sections, s)
			continue
		}
		if env == nil || b.fresh {
			closeStack()
			start := time.Now()
			// The function log feeds the votes section the tally's EMF lines.
			e, err := stack.Up(ctx, stack.Options{Root: root, Setups: registry.All, Progress: log, FunctionLog: stackLog, KeyWriteLimit: 1000, SearchCores: searchCores})
			if err != nil {
				return err
			}
			env = e
			if err := env.Start(ctx); err != nil {
				return err
			}
			rss, _ := env.Servers.RSSBytes()
			stacks.printf("| %s and after | %s | %d | %.0f MB |", b.name, time.Since(start).Round(10*time.Millisecond), len(env.Stack.Resources), float64(rss)/(1<<20))
		}
		fmt.Fprintf(log, "bench %s…\n", b.name)
		s, err := b.run(ctx, env, scale)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		sections = append(sections, s)
	}
	closeStack()
	if !strings.Contains(stacks.text.String(), "| MB") && !strings.Contains(stacks.text.String(), " MB |") {
		sections = sections[1:] // every benchmark run brought its own stacks
	}
	return write(out, sections)
}

func write(out string, sections []*section) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ddbpipe benchmark report\n\n%s, %s/%s, %d CPUs, %s. Figures come from the local stack\n(DynamoDB Local, fauxqs, versitygw, ZincSearch on 127.0.0.1): they compare designs and track regressions;\nthey are not AWS latencies.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	n := 0
	for _, s := range sections {
		fmt.Fprintf(&b, "## %s\n\n%s\n", s.title, s.text.String())
		for _, c := range s.charts {
			n++
			if err := writeChart(&b, out, n, c.Title, c.WritePNG); err != nil {
				return err
			}
		}
		for _, t := range s.timelines {
			n++
			if err := writeChart(&b, out, n, t.Title, t.WritePNG); err != nil {
				return err
			}
		}
	}
	path := filepath.Join(out, "report.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d charts)\n", path, n)
	return nil
}

// writeChart writes the n-th chart of the report as a PNG in out and
// links it from the report b.
func writeChart(b *strings.Builder, out string, n int, title string, png func(io.Writer) error) error {
	name := fmt.Sprintf("chart-%02d.png", n)
	f, err := os.Create(filepath.Join(out, name))
	if err != nil {
		return err
	}
	err = png(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "![%s](%s)\n\n", title, name)
	return nil
}

func selected(name, only string) bool {
	if only == "" {
		return true
	}
	for _, w := range strings.Split(only, ",") {
		exact, ok := strings.CutPrefix(w, "=")
		if ok && name == exact || !ok && w != "" && strings.Contains(name, w) {
			return true
		}
	}
	return false
}
