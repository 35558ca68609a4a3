package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ddbpipe/ddbpipe/shared/platform/apigw"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/voteslambda"
)

// votesRejected reads a poll's rejects through the HTTP API, as a producer
// would (signed as ApiReadPolicy's api-read on a local stack that judges
// IAM): their counts by reason and the latest, newest first. Nothing is
// taken from the operators' rejects queue.
func votesRejected(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAPIFlags("votes rejected", asAPIRead, stderr)
	id := f.fs.String("poll", "", "poll id (required)")
	limit := f.fs.Int("limit", votes.DefaultRejectSample, fmt.Sprintf("how many of the latest rejects to show, 1 to %d", votes.MaxRejectSample))
	asJSON := f.fs.Bool("json", false, `print the API's answer: {"pollId":...,"rejected":{reason:n},"recent":[...]}`)
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("-poll is required")
	}
	r, err := readPollRejects(ctx, f, *id, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	fmt.Fprintf(stdout, "poll %s: %s\n", r.PollID, rejectCounts(r.Rejected))
	if len(r.Recent) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SENT\tMESSAGE\tREASON\tVOTE\tDETAIL")
	for _, rec := range r.Recent {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rec.SentAt.Format(time.RFC3339), rec.MessageID, rec.Reason,
			orDash(rec.VoteID), printable(rec.Detail))
	}
	return tw.Flush()
}

// readPollRejects calls GET /polls/{id}/rejects, mapping its errors to the
// CLI's words.
func readPollRejects(ctx context.Context, f apiFlags, id string, limit int) (votes.PollRejects, error) {
	cfg, api, err := f.endpoint(ctx)
	if err != nil {
		return votes.PollRejects{}, err
	}
	client, err := sigv4.Client(cfg, api, nil)
	if err != nil {
		return votes.PollRejects{}, err
	}
	u := strings.TrimSuffix(api, "/") + "/polls/" + url.PathEscape(id) + "/rejects?limit=" + strconv.Itoa(limit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return votes.PollRejects{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return votes.PollRejects{}, fmt.Errorf("read the rejects of %s: %w", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return votes.PollRejects{}, fmt.Errorf("read the rejects of %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		e, _ := apigw.ReadError(resp.StatusCode, body)
		if e.ErrorBody.Error == voteslambda.ReasonUnknownPoll {
			return votes.PollRejects{}, fmt.Errorf("no poll %q (`ddbpipe polls ls` lists the polls)", id)
		}
		return votes.PollRejects{}, fmt.Errorf("GET /polls/%s/rejects: %w", id, e)
	}
	var r votes.PollRejects
	if err := json.Unmarshal(body, &r); err != nil {
		return votes.PollRejects{}, fmt.Errorf("GET /polls/%s/rejects: %w", id, err)
	}
	return r, nil
}

// rejectCounts is "n rejected (reason n, ...)", the most frequent reason first.
func rejectCounts(counts map[votes.Reason]int64) string {
	var total int64
	reasons := make([]votes.Reason, 0, len(counts))
	for r, n := range counts {
		total += n
		reasons = append(reasons, r)
	}
	if total == 0 {
		return "0 rejected"
	}
	sort.Slice(reasons, func(i, j int) bool {
		a, b := counts[reasons[i]], counts[reasons[j]]
		return a > b || a == b && reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, counts[r])
	}
	return fmt.Sprintf("%d rejected (%s)", total, strings.Join(parts, ", "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable is s with control characters, backslashes and bytes that are
// not UTF-8 escaped as Go quotes them: a detail may quote a producer's
// bytes, never sent raw to a terminal. Double quotes stay as they are
// (no option "hamster"): the detail is a column, not a Go string.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r != '\\' && strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
