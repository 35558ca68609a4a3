package main

// The operator's queue commands: read the votes dead-letter and rejects
// queues without consuming them (inspect), move dead letters back to the
// votes queue (redrive), and read the stream-failure queue (archive
// failures). docs/operators.md (the runbook) says when to use which.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// queueClient is what the queue commands need from SQS; *sqs.Client
// satisfies it.
type queueClient interface {
	votessqs.InspectAPI
	votessqs.RedriveAPI
}

var _ queueClient = (*sqs.Client)(nil)

// The queues, by the variable naming each (the stack's outputs, as
// `local up` writes them to local.env).
const (
	envVotesQueue     = "VOTES_QUEUE_URL"
	envDeadLetters    = "VOTES_DEAD_LETTER_QUEUE_URL"
	envRejects        = "VOTES_REJECTS_QUEUE_URL"
	envStreamFailures = "STREAM_FAILURES_QUEUE_URL"
)

// queueFlags are the flags every queue command has.
type queueFlags struct {
	fs                  *flag.FlagSet
	root, state, url    *string
	asJSON              *bool
	max, samples        *int
	hold                *time.Duration
	defaultEnv, purpose string
}

func newQueueFlags(name, env, purpose string, defaultMax int, stderr io.Writer) *queueFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &queueFlags{
		fs: fs, defaultEnv: env, purpose: purpose,
		root:    fs.String("root", "", "repository root (default: the folder holding template.yaml)"),
		state:   fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)"),
		url:     fs.String("queue-url", "", "the "+purpose+" (default: $"+env+", else "+env+" in <state-dir>/local.env)"),
		asJSON:  fs.Bool("json", false, "print the result as JSON"),
		max:     fs.Int("max", defaultMax, "read (or move) at most this many messages; 0 for all"),
		samples: fs.Int("samples", 3, "sample messages to show"),
		hold:    fs.Duration("hold", 30*time.Second, "how long a message read stays hidden from others before it is released (whole seconds, at most 12h)"),
	}
}

// open parses args and returns the SQS client, the queue's URL and getenv.
func (q *queueFlags) open(ctx context.Context, args []string) (queueClient, string, func(string) string, error) {
	if err := q.fs.Parse(args); err != nil {
		return nil, "", nil, err
	}
	if q.fs.NArg() > 0 {
		return nil, "", nil, fmt.Errorf("%s: unexpected argument %q (flags only; see -h)", q.fs.Name(), q.fs.Arg(0))
	}
	if *q.max < 0 || *q.samples < 0 || *q.hold < time.Second || *q.hold > 12*time.Hour {
		return nil, "", nil, fmt.Errorf("%s: -max and -samples at least 0, -hold from 1s to 12h", q.fs.Name())
	}
	getenv, err := stackEnv(*q.root, *q.state, asOperator)
	if err != nil {
		return nil, "", nil, err
	}
	url := *q.url
	if url == "" {
		url = getenv(q.defaultEnv)
	}
	if url == "" {
		return nil, "", nil, fmt.Errorf("%s: no %s: pass -queue-url, export %s (the stack's output), or run `ddbpipe local up`", q.fs.Name(), q.purpose, q.defaultEnv)
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return nil, "", nil, err
	}
	return sqs.NewFromConfig(cfg), url, getenv, nil
}

// queueSummary is what inspect prints: the package's summary, and what
// to do next.
type queueSummary struct {
	votessqs.Summary
	Next string `json:"next"`
}

// inspect reads a queue without consuming it and summarises it.
func inspect(ctx context.Context, c queueClient, kind votessqs.Kind, url string, max, samples int, hold time.Duration, now time.Time) (queueSummary, error) {
	sum, err := votessqs.Inspect(ctx, c, kind, url, max, samples, hold, now)
	s := queueSummary{Summary: sum}
	switch {
	case kind == votessqs.RejectsKind:
		s.Next = "rejected votes are invalid and are never redriven: fix the producer (the reasons above say what it sends wrong) and send the votes again"
	case s.ByReason[votessqs.Countable] > 0:
		s.Next = "find why the counter failed on them (its Errors alarm, its logs), fix it, then: ddbpipe votes dlq redrive [-dry-run] [-max N]"
	default:
		s.Next = "nothing to redrive"
	}
	return s, err
}

func printSummary(w io.Writer, title string, s queueSummary, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s %s: %d messages read (about %d on the queue)\n", title, s.Queue, s.Read, s.Approximate)
	if !s.Oldest.IsZero() {
		fmt.Fprintf(tw, "  oldest %s (%s ago), newest %s (%s ago)\n", s.Oldest.Format(time.RFC3339), now.Sub(s.Oldest).Round(time.Second),
			s.Newest.Format(time.RFC3339), now.Sub(s.Newest).Round(time.Second))
	}
	reasons := make([]string, 0, len(s.ByReason))
	for r := range s.ByReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		a, b := s.ByReason[reasons[i]], s.ByReason[reasons[j]]
		return a > b || a == b && reasons[i] < reasons[j]
	})
	if len(reasons) > 0 {
		fmt.Fprintln(tw, "  by reason:")
	}
	for _, r := range reasons {
		fmt.Fprintf(tw, "    %s\t%d\n", r, s.ByReason[r])
	}
	for i, m := range s.Samples {
		if i == 0 {
			fmt.Fprintln(tw, "  samples:")
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%d bytes\t%s\n", m.MessageID, m.Sent.Format(time.RFC3339), m.Reason, m.Bytes, m.Body)
	}
	fmt.Fprintf(tw, "  next: %s\n", s.Next)
	return tw.Flush()
}

func queueInspect(kind votessqs.Kind, name, env, purpose, title string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		q := newQueueFlags(name, env, purpose, 1000, stderr)
		c, url, _, err := q.open(ctx, args)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		s, err := inspect(ctx, c, kind, url, *q.max, *q.samples, *q.hold, now)
		if s.Queue != "" {
			var perr error
			if *q.asJSON {
				perr = json.NewEncoder(stdout).Encode(s)
			} else {
				perr = printSummary(stdout, title, s, now)
			}
			err = errors.Join(err, perr)
		}
		return err
	}
}

var (
	votesDLQInspect     = queueInspect(votessqs.DeadLetters, "votes dlq inspect", envDeadLetters, "votes dead-letter queue", "votes dead-letter queue")
	votesRejectsInspect = queueInspect(votessqs.RejectsKind, "votes rejects inspect", envRejects, "votes rejects queue", "votes rejects queue")
)

// votesRejectsRedrive refuses: a rejected vote is invalid, and the counter
// would reject it again.
func votesRejectsRedrive(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("votes rejects redrive: refused: a rejected vote is invalid (see its reason with `ddbpipe votes rejects inspect`) " +
		"and the counter would only reject it again; fix the producer and send the votes again (`ddbpipe votes send`)")
}

// redriveResult is what a redrive did.
type redriveResult struct {
	From   string `json:"from"`
	To     string `json:"to"`
	DryRun bool   `json:"dryRun,omitempty"`
	votessqs.RedriveResult
	// Would: with -dry-run, the messages a redrive would move.
	Would *queueSummary `json:"would,omitempty"`
}

func votesDLQRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	q := newQueueFlags("votes dlq redrive", envDeadLetters, "votes dead-letter queue", 0, stderr)
	to := q.fs.String("to", "", "the votes queue (default: $"+envVotesQueue+", else "+envVotesQueue+" in <state-dir>/local.env)")
	dry := q.fs.Bool("dry-run", false, "read the messages a redrive would move, say what they are, move nothing")
	quiet := q.fs.Bool("quiet", false, "no progress on stderr")
	c, from, getenv, err := q.open(ctx, args)
	if err != nil {
		return err
	}
	if *to == "" {
		*to = getenv(envVotesQueue)
	}
	if *to == "" {
		return fmt.Errorf("votes dlq redrive: no votes queue: pass -to, export %s, or run `ddbpipe local up`", envVotesQueue)
	}
	if *to == from {
		return errors.New("votes dlq redrive: -to is the dead-letter queue itself")
	}
	var res redriveResult
	if *dry {
		now := time.Now().UTC()
		s, err := inspect(ctx, c, votessqs.DeadLetters, from, *q.max, *q.samples, *q.hold, now)
		if err != nil {
			return err
		}
		res = redriveResult{From: from, To: *to, DryRun: true, Would: &s}
	} else {
		o := votessqs.RedriveOptions{Max: *q.max, Hold: *q.hold}
		show := newProgress(stderr)
		if !*quiet {
			o.Progress = func(r votessqs.RedriveResult) {
				show.update(fmt.Sprintf("moved %d, not yet %d, retries %d", r.Moved, r.Failed, r.Retries))
			}
		}
		res = redriveResult{From: from, To: *to}
		res.RedriveResult, err = votessqs.Redrive(ctx, c, from, *to, o)
		show.done()
	}
	var perr error
	switch {
	case *q.asJSON:
		perr = json.NewEncoder(stdout).Encode(res)
	case res.DryRun:
		fmt.Fprintf(stdout, "dry run: would move %d messages from %s to %s (%d countable; the others the counter rejects again, to the rejects queue)\n",
			res.Would.Read, from, *to, res.Would.ByReason["countable"])
	default:
		fmt.Fprintf(stdout, "moved %d messages from %s to %s; %d not moved, %d sent but not deleted (%d failed calls retried)\n",
			res.Moved, from, *to, res.Failed, res.Undeleted, res.Retries)
	}
	return errors.Join(err, perr)
}

// streamRetention is how long DynamoDB Streams keeps a record.
const streamRetention = 24 * time.Hour

// failedBatch is a stream failure as the operator reads it.
type failedBatch struct {
	MessageID    string    `json:"messageId"`
	Table        string    `json:"table,omitempty"`
	StreamARN    string    `json:"streamArn,omitempty"`
	Shard        string    `json:"shardId,omitempty"`
	Start        string    `json:"startSequenceNumber,omitempty"`
	End          string    `json:"endSequenceNumber,omitempty"`
	Records      int       `json:"batchSize,omitempty"`
	FirstArrival time.Time `json:"approximateArrivalOfFirstRecord,omitzero"`
	LastArrival  time.Time `json:"approximateArrivalOfLastRecord,omitzero"`
	Condition    string    `json:"condition,omitempty"`
	Function     string    `json:"function,omitempty"`
	Attempts     int       `json:"attempts,omitempty"`
	// ReadableUntil: when the stream drops the batch's first record.
	ReadableUntil time.Time `json:"readableUntil,omitzero"`
	Readable      bool      `json:"readable"`
	Problem       string    `json:"problem,omitempty"` // the message is not a stream failure record
	Action        string    `json:"action"`
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// readFailure turns a stream-failure message into what to do.
func readFailure(id, body string, now time.Time) failedBatch {
	fb := failedBatch{MessageID: id}
	var f ddbstream.Failure
	if err := json.Unmarshal([]byte(body), &f); err != nil || f.Batch == nil {
		fb.Problem = "not a stream failure record: " + votessqs.Printable(body)
		if err != nil {
			fb.Problem = fmt.Sprintf("not JSON (%s): %s", votessqs.Printable(err.Error()), votessqs.Printable(body))
		}
		fb.Action = "look at it by hand (aws sqs receive-message); it says nothing about a stream"
		return fb
	}
	b := f.Batch
	fb.Table, _, _ = ledger.StreamTable(b.StreamARN) // "" when it is not a stream ARN
	fb.StreamARN, fb.Shard, fb.Start, fb.End, fb.Records = b.StreamARN, b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber, b.BatchSize
	fb.FirstArrival, fb.LastArrival = parseTime(b.FirstArrival), parseTime(b.LastArrival)
	fb.Condition, fb.Function, fb.Attempts = f.RequestContext.Condition, f.RequestContext.FunctionARN, f.RequestContext.ApproximateInvokeCount
	first := fb.FirstArrival
	if first.IsZero() {
		first = parseTime(f.Timestamp) // no arrival times: the failure's time, which is later
	}
	if !first.IsZero() {
		fb.ReadableUntil = first.Add(streamRetention)
		fb.Readable = now.Before(fb.ReadableUntil)
	}
	base, month, monthly := ledger.SplitTable(fb.Table)
	switch {
	case strings.Contains(strings.ToLower(functionName(fb.Function)), "reaper"):
		fb.Action = fmt.Sprintf("the reaper did not remove the payloads these records replaced or deleted: find why it failed (%s; its logs near %s); "+
			"nothing to replay: the hourly sweeper deletes every payload no reference names once older than OrphanGraceMinutes", fb.Condition, fb.LastArrival.Format(time.RFC3339))
	case fb.Readable:
		fb.Action = fmt.Sprintf("the stream holds these records until %s: find why %s failed (%s; its logs near %s) and fix it, then re-read them "+
			"(aws dynamodbstreams get-shard-iterator --stream-arn %s --shard-id %s --shard-iterator-type AT_SEQUENCE_NUMBER --sequence-number %s, "+
			"get-records up to %s) and invoke the archiver with them",
			fb.ReadableUntil.Format(time.RFC3339), functionName(fb.Function), fb.Condition, fb.LastArrival.Format(time.RFC3339), fb.StreamARN, fb.Shard, fb.Start, fb.End)
	case monthly:
		fb.Action = fmt.Sprintf("the stream no longer holds these records: the archive of %s month %s lacks them until the rotator retires the month — "+
			"its verification finds the gap and its snapshot export fills it from the table (`ddbpipe tables rotate`; the month is kept one more run, outcome alarm)", base, month)
	case fb.Table != "":
		fb.Action = fmt.Sprintf("the stream no longer holds these records: the archive of %s lacks those changes for good; "+
			"the table still holds its current items: export them (aws dynamodb export-table-to-point-in-time, or a Scan) to backfill the partition", fb.Table)
	default:
		fb.Action = "no table in the stream ARN: look at the record by hand"
	}
	return fb
}

func functionName(arn string) string {
	if i := strings.LastIndex(arn, ":function:"); i >= 0 {
		return arn[i+len(":function:"):]
	}
	if arn == "" {
		return "the function"
	}
	return arn
}

// failuresReport is what `archive failures` prints.
type failuresReport struct {
	Queue       string        `json:"queue"`
	Approximate int           `json:"approximateMessages"`
	Read        int           `json:"read"`
	Readable    int           `json:"readable"`
	Expired     int           `json:"expired"`
	Batches     []failedBatch `json:"batches"`
}

func readFailures(ctx context.Context, c queueClient, url string, max int, hold time.Duration, now time.Time) (failuresReport, error) {
	approx, _, err := votessqs.Depth(ctx, c, url)
	if err != nil {
		return failuresReport{}, err
	}
	msgs, err := votessqs.Peek(ctx, c, url, max, hold)
	rep := failuresReport{Queue: url, Approximate: approx, Read: len(msgs), Batches: []failedBatch{}}
	for _, m := range msgs {
		fb := readFailure(aws.ToString(m.MessageId), aws.ToString(m.Body), now)
		if fb.Problem == "" && fb.Readable {
			rep.Readable++
		} else if fb.Problem == "" {
			rep.Expired++
		}
		rep.Batches = append(rep.Batches, fb)
	}
	sort.SliceStable(rep.Batches, func(i, j int) bool {
		a, b := rep.Batches[i], rep.Batches[j]
		return a.Table < b.Table || a.Table == b.Table && (a.Shard < b.Shard || a.Shard == b.Shard && a.Start < b.Start)
	})
	return rep, err
}

func archiveFailures(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	q := newQueueFlags("archive failures", envStreamFailures, "stream-failure queue", 1000, stderr)
	c, url, _, err := q.open(ctx, args)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	rep, err := readFailures(ctx, c, url, *q.max, *q.hold, now)
	if rep.Queue == "" {
		return err
	}
	if *q.asJSON {
		return errors.Join(err, json.NewEncoder(stdout).Encode(rep))
	}
	fmt.Fprintf(stdout, "stream failures %s: %d read (about %d on the queue); %d still in their stream, %d beyond its 24 h\n",
		url, rep.Read, rep.Approximate, rep.Readable, rep.Expired)
	for _, b := range rep.Batches {
		if b.Problem != "" {
			fmt.Fprintf(stdout, "\n  message %s: %s\n    what to do: %s\n", b.MessageID, b.Problem, b.Action)
			continue
		}
		fmt.Fprintf(stdout, "\n  table %s, shard %s: %d records, sequence %s to %s\n", b.Table, b.Shard, b.Records, b.Start, b.End)
		fmt.Fprintf(stdout, "    arrived %s to %s; %s after %d attempts of %s\n", b.FirstArrival.Format(time.RFC3339), b.LastArrival.Format(time.RFC3339),
			b.Condition, b.Attempts, functionName(b.Function))
		fmt.Fprintf(stdout, "    what to do: %s\n", b.Action)
	}
	if rep.Read > 0 {
		fmt.Fprintln(stdout, "\nOnce handled, remove the records: aws sqs purge-queue --queue-url "+url)
	}
	return err
}
