package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectsclient"
)

// objectsSearch is `objects search WORDS…`: one page of hits (or -pages
// of them), best first, each with the version it was indexed at.
func objectsSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("objects search", asAPIRead, stderr)
	typ := f.fs.String("type", "", "content type, exact (application/pdf) or a family (text/*)")
	minSize := f.fs.String("min-size", "", "smallest size: bytes, or with a unit (500KB, 1MB, 2GiB)")
	maxSize := f.fs.String("max-size", "", "largest size, as -min-size")
	since := f.fs.String("since", "", "modified at or after: an RFC 3339 time, a date (2026-11-01), or an age (36h, 7d)")
	until := f.fs.String("until", "", "modified at or before, as -since")
	prefix := f.fs.String("prefix", "", "keys starting with this")
	limit := f.fs.Int("limit", 20, "hits per page (1 to 100)")
	pages := f.fs.Int("pages", 1, "pages to read, following the cursor (0: all, up to 10,000 hits)")
	fresh := f.fs.Bool("fresh", false, "check every hit against the table; leave out the ones deleted or changed since they were indexed")
	asJSON := f.fs.Bool("json", false, "print one JSON hit per line")
	wait := f.fs.Duration("wait", 0, "retry the first page until something matches, for up to this long (the index follows the table moments behind)")
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	o := objectsclient.SearchOptions{ContentType: *typ, Prefix: *prefix, Limit: *limit, Fresh: *fresh}
	var err error
	if o.MinSize, err = parseSize("-min-size", *minSize); err != nil {
		return err
	}
	if o.MaxSize, err = parseSize("-max-size", *maxSize); err != nil {
		return err
	}
	now := time.Now()
	if o.Since, err = parseSince("-since", *since, now); err != nil {
		return err
	}
	if o.Until, err = parseSince("-until", *until, now); err != nil {
		return err
	}
	if *wait < 0 {
		return fmt.Errorf("objects search: -wait %s: want a duration of 0 or more", *wait)
	}
	if *pages < 0 {
		return fmt.Errorf("objects search: -pages %d: want 0 (all) or more", *pages)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	words := strings.Join(f.fs.Args(), " ")
	p := hitPrinter{json: json.NewEncoder(stdout), tw: tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0), asJSON: *asJSON}
	var last objectsclient.SearchResult
	for page := 1; *pages == 0 || page <= *pages; page++ {
		search := c.Search
		if page == 1 {
			search = func(ctx context.Context, words string, o objectsclient.SearchOptions) (objectsclient.SearchResult, error) {
				return searchUntilFound(ctx, c, words, o, *wait)
			}
		}
		if last, err = search(ctx, words, o); err != nil {
			p.tw.Flush()
			return err
		}
		if err := p.print(last); err != nil {
			return err
		}
		if o.Cursor = last.Cursor; o.Cursor == "" {
			break
		}
	}
	if *asJSON {
		return nil
	}
	if err := p.tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, searchSummary(p.n, last, *fresh))
	return nil
}

type hitPrinter struct {
	json   *json.Encoder
	tw     *tabwriter.Writer
	asJSON bool
	n      int
}

func (p *hitPrinter) print(r objectsclient.SearchResult) error {
	for _, h := range r.Hits {
		if p.asJSON {
			if err := p.json.Encode(h); err != nil {
				return err
			}
			p.n++
			continue
		}
		if p.n == 0 {
			fmt.Fprintln(p.tw, "MODIFIED\tSIZE\tVERSION\tTYPE\tKEY")
		}
		p.n++
		fmt.Fprintf(p.tw, "%s\t%d\t%d\t%s\t%s\n", h.Modified.Format("2006-01-02 15:04:05"), h.Size, h.Version, h.ContentType, showKey(h.Key))
		if h.Snippet != "" {
			fmt.Fprintf(p.tw, "\t\t\t\t  %s\n", showKey(h.Snippet))
		}
	}
	return nil
}

func searchSummary(shown int, last objectsclient.SearchResult, fresh bool) string {
	s := fmt.Sprintf("%d of %d matching objects shown", shown, last.Total)
	if last.Cursor != "" {
		s += "; more with -pages 0 or a larger -limit"
	}
	switch {
	case fresh && last.Dropped > 0:
		s += fmt.Sprintf("; checked against the table: %d left out of the last page as deleted or changed since indexed", last.Dropped)
	case fresh:
		s += "; each checked against the table"
	default:
		s += " (as indexed, moments behind the table; -fresh checks each)"
	}
	return s
}

// parseSize reads a size: bytes, or a number with a unit (KB = 1,000,
// KiB = 1,024 bytes; MB, MiB, GB, GiB likewise; B).
func parseSize(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToUpper(strings.TrimSpace(s[len(num):]))
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || mult == 0 || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("objects search: %s %q: want bytes, or a number with KB, MB, GB, KiB, MiB or GiB", flag, s)
	}
	return n * mult, nil
}

// parseSince reads a time: RFC 3339, a date, or an age before now (a Go
// duration, or whole days: 7d).
func parseSince(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("objects search: %s %q: want an RFC 3339 time, a date (2026-11-01) or an age (36h, 7d)", flag, s)
}

// searchUntilFound asks again, with backoff, until the search matches
// something or wait is over (then the last, empty, answer stands).
func searchUntilFound(ctx context.Context, c *objectsclient.Client, words string, o objectsclient.SearchOptions, wait time.Duration) (objectsclient.SearchResult, error) {
	var r objectsclient.SearchResult
	err := pollUntil(ctx, wait, func(bool) (bool, error) {
		var err error
		r, err = c.Search(ctx, words, o)
		return len(r.Hits) > 0, err
	})
	return r, err
}
