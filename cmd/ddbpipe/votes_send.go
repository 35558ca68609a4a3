package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// votesSend sends votes to the votes queue: a generated workload on one
// poll, paced, with a share of duplicates to exercise deduplication.
func votesSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return votesSendEnv(ctx, args, stdout, stderr, os.Getenv)
}

type votesSendFlags struct {
	root, stateDir, queueURL string
	poll, options            string
	count, voters, workers   int
	rate, dupRate, skew      float64
	json, quiet, progress    bool
	noCheck, optionsSet      bool
}

const votesSendUsage = `usage: ddbpipe votes send --poll P [flags]

Sends --count votes on poll P to the votes queue, spread over --options
(default: all the poll's options), plus --dup-rate × count duplicates
(votes sent again with the same voteId and body, which the counter must
count once). The queue is --queue-url, else $VOTES_QUEUE_URL (with the AWS
settings of the environment), else VOTES_QUEUE_URL in .ddbpipe/local.env
(with that file's settings), as written by ` + "`ddbpipe local up`" + `.

Before sending it reads the poll from the counters table
($COUNTERS_TABLE_NAME, or the local stack's) and refuses a poll that does
not exist, is not open, or lacks an option, since the counter would reject
every such vote. --no-check sends without reading the poll (a producer
that may only send to the queue).

Flags:
`

func (f *votesSendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.poll, "poll", "", "the poll's id (required)")
	fs.IntVar(&f.count, "count", 1, "distinct votes to send")
	fs.Float64Var(&f.rate, "rate", 0, "messages per second (0: as fast as the queue takes them)")
	fs.Float64Var(&f.dupRate, "dup-rate", 0, "share of the votes sent a second time with the same voteId, 0 to 1")
	fs.StringVar(&f.options, "options", "", "options to vote for, comma-separated (default: every option of the poll)")
	fs.BoolVar(&f.noCheck, "no-check", false, "send without reading the poll (then --options is required)")
	fs.Float64Var(&f.skew, "skew", 0, "0 spreads votes evenly; s > 0 weighs option i by 1/i^s, so the first options win")
	fs.IntVar(&f.voters, "voters", 0, "distinct voter ids (0: a new voter for each vote)")
	fs.IntVar(&f.workers, "concurrency", 4, "batches in flight")
	fs.StringVar(&f.queueURL, "queue-url", "", "the votes queue (default: $VOTES_QUEUE_URL, else VOTES_QUEUE_URL in <state-dir>/local.env)")
	fs.StringVar(&f.root, "root", "", "repository root (default: the folder holding template.yaml)")
	fs.StringVar(&f.stateDir, "state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON instead of the summary line")
	fs.BoolVar(&f.quiet, "quiet", false, "print neither progress nor the summary line")
	fs.BoolVar(&f.progress, "progress", false, "draw the progress bar on stderr even when it is not a terminal")
}

// load checks the flags and turns them into the workload.
func (f *votesSendFlags) load() (votesload.Options, error) {
	o := votesload.Options{PollID: f.poll, Count: f.count, Rate: f.rate, DupRate: f.dupRate, Skew: f.skew, Voters: f.voters, Concurrency: f.workers}
	switch {
	case f.poll == "":
		return o, errors.New("--poll is required")
	case f.count < 1:
		return o, fmt.Errorf("--count %d: want at least 1", f.count)
	case !(f.rate >= 0) || math.IsInf(f.rate, 0):
		return o, fmt.Errorf("--rate %v: want 0 (no limit) or a number of messages per second", f.rate)
	case !(f.dupRate >= 0 && f.dupRate <= 1):
		return o, fmt.Errorf("--dup-rate %v: want a share between 0 and 1", f.dupRate)
	case !(f.skew >= 0) || math.IsInf(f.skew, 0):
		return o, fmt.Errorf("--skew %v: want 0 (even) or a positive number", f.skew)
	case f.voters < 0:
		return o, fmt.Errorf("--voters %d: want 0 (one per vote) or more", f.voters)
	case f.workers < 1:
		return o, fmt.Errorf("--concurrency %d: want at least 1", f.workers)
	}
	if err := votes.ValidID(f.poll); err != nil {
		return o, fmt.Errorf("--poll %q: %w", f.poll, err)
	}
	if f.options == "" {
		if f.noCheck {
			return o, errors.New("--options is required with --no-check (without it they come from the poll)")
		}
		return o, nil // the poll's, once it is read
	}
	seen := map[string]bool{}
	for _, opt := range strings.Split(f.options, ",") {
		opt = strings.TrimSpace(opt)
		if err := votes.ValidID(opt); err != nil {
			return o, fmt.Errorf("--options %q: option %q: %w", f.options, opt, err)
		}
		if seen[opt] {
			return o, fmt.Errorf("--options %q: option %q is listed twice", f.options, opt)
		}
		seen[opt] = true
		o.Options = append(o.Options, opt)
	}
	if err := o.Validate(); err != nil { // the same rules, in case they grow
		return o, err
	}
	return o, nil
}

// queue finds the votes queue and the variables to configure AWS with.
func (f *votesSendFlags) queue(getenv func(string) string) (string, func(string) string, error) {
	if f.queueURL != "" {
		return f.queueURL, getenv, nil
	}
	if u := getenv("VOTES_QUEUE_URL"); u != "" {
		return u, getenv, nil
	}
	const hint = "no votes queue: pass --queue-url, set VOTES_QUEUE_URL, or start the local stack with `ddbpipe local up`"
	dir, err := stateFolder(f.root, f.stateDir)
	if err != nil {
		return "", nil, fmt.Errorf("%s (%w)", hint, err)
	}
	file := filepath.Join(dir, "local.env")
	vars, err := loadEnvFile(file)
	if err != nil {
		return "", nil, fmt.Errorf("%s (%w)", hint, err)
	}
	u := vars["VOTES_QUEUE_URL"]
	if u == "" {
		return "", nil, fmt.Errorf("%s: %s has no VOTES_QUEUE_URL", hint, file)
	}
	return u, func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return getenv(k)
	}, nil
}

// votesSendEnv is votesSend with the environment given, for tests.
func votesSendEnv(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("votes send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f votesSendFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), votesSendUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("votes send: unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	f.optionsSet = flagSet(fs, "options")
	if _, err := f.load(); err != nil { // the flags alone, before any call
		return fmt.Errorf("votes send: %w", err)
	}
	queueURL, vars, err := f.queue(getenv)
	if err != nil {
		return fmt.Errorf("votes send: %w", err)
	}
	vars = asIdentity(vars, asProducer)
	cfg, err := cliAWS(ctx, vars)
	if err != nil {
		return fmt.Errorf("votes send: %w", err)
	}
	var poll votes.Poll
	if !f.noCheck {
		if poll, err = checkPoll(ctx, cfg, vars, &f); err != nil {
			return fmt.Errorf("votes send: %w", err)
		}
	}
	o, err := f.load()
	if err != nil {
		return fmt.Errorf("votes send: %w", err)
	}
	// Votes are cast on the stack's clock (local.env's clock file, which
	// `ddbpipe local clock` moves); the real one elsewhere.
	clock := lambdafn.NewVars(vars).Clock()
	o.Now = clock
	producer := votessqs.NewProducer(sqs.NewFromConfig(cfg), queueURL, votessqs.WithClock(clock))

	var bar *votesProgressBar
	if !f.quiet && (f.progress || votesIsTerminal(stderr)) {
		bar = &votesProgressBar{w: stderr, start: time.Now()}
		o.Progress = bar.update
	}
	res, err := votesload.Run(ctx, producer, o)
	if bar != nil {
		bar.finish()
	}
	switch {
	case f.json:
		b, jerr := json.Marshal(res)
		if jerr != nil {
			return errors.Join(err, jerr)
		}
		fmt.Fprintln(stdout, string(b))
	case !f.quiet:
		fmt.Fprintln(stdout, votesSummary(res, o.Options, queueURL))
	}
	if err != nil {
		return fmt.Errorf("votes send: %w", err)
	}
	if !f.quiet && !f.json {
		fmt.Fprintln(stdout, countedHint(vars, f.poll, poll.ID != ""))
	}
	return nil
}

// checkPoll reads the poll the votes are for and refuses what the counter
// would reject for every vote: no such poll, a poll not open now, an
// option it lacks. Without --options it votes for all the poll's options.
func checkPoll(ctx context.Context, cfg aws.Config, vars func(string) string, f *votesSendFlags) (votes.Poll, error) {
	table := vars("COUNTERS_TABLE_NAME")
	if table == "" {
		return votes.Poll{}, errors.New("cannot check the poll: no counters table (set COUNTERS_TABLE_NAME, or pass --no-check to send without checking)")
	}
	if err := votes.ValidID(f.poll); err != nil {
		return votes.Poll{}, fmt.Errorf("--poll %q: %w", f.poll, err)
	}
	store := votesddb.New(awsenv.DynamoDB(cfg), table, vars("LEDGER_TABLE_PREFIX"))
	p, err := store.Poll(ctx, f.poll)
	if errors.Is(err, votes.ErrNoPoll) {
		known := "there are no polls yet"
		if all, lerr := store.AllPolls(ctx); lerr == nil && len(all) > 0 {
			ids := make([]string, 0, min(len(all), 20))
			for _, q := range all[:min(len(all), 20)] {
				ids = append(ids, q.ID)
			}
			known = "polls: " + strings.Join(ids, ", ")
			if len(all) > 20 {
				known += fmt.Sprintf(" and %d more (`ddbpipe polls ls`)", len(all)-20)
			}
		}
		return p, fmt.Errorf("no poll %q (%s); create it with `ddbpipe polls create`, or pass --no-check", f.poll, known)
	}
	if err != nil {
		return p, fmt.Errorf("read poll %s: %w", f.poll, err)
	}
	now := lambdafn.NewVars(vars).Clock()()
	switch {
	case !p.Opens.IsZero() && now.Before(p.Opens):
		return p, fmt.Errorf("poll %s opens at %s: votes cast now would be rejected (poll-not-open)", p.ID, p.Opens.Format(time.RFC3339))
	case !p.Closes.IsZero() && !now.Before(p.Closes):
		return p, fmt.Errorf("poll %s closed at %s: votes cast now would be rejected (poll-closed)", p.ID, p.Closes.Format(time.RFC3339))
	}
	if !f.optionsSet {
		f.options = strings.Join(p.Options, ",")
		return p, nil
	}
	for _, opt := range strings.Split(f.options, ",") {
		if opt = strings.TrimSpace(opt); opt != "" && !p.HasOption(opt) {
			return p, fmt.Errorf("poll %s has no option %q; its options are %s", p.ID, opt, strings.Join(p.Options, ", "))
		}
	}
	return p, nil
}

// countedHint says when the votes just sent show in the results: after the
// counter's batching window and the tally's (the stack's outputs), plus a
// second of work.
func countedHint(vars func(string) string, poll string, checked bool) string {
	counter, cerr := strconv.Atoi(vars("COUNTER_BATCHING_WINDOW_SECONDS"))
	tally, terr := strconv.Atoi(vars("TALLY_BATCHING_WINDOW_SECONDS"))
	hint := "the counter and the tally add them to the results within seconds"
	if cerr == nil && terr == nil {
		hint = fmt.Sprintf("counted in about %ds (the counter gathers votes for up to %ds, the tally for %ds)", counter+tally+1, counter, tally)
	}
	if !checked {
		hint += "; the poll was not checked, so votes it does not accept go to the rejects queue (`ddbpipe votes rejects inspect`)"
	}
	return fmt.Sprintf("%s: `ddbpipe votes results -poll %s`", hint, poll)
}

// votesSummary is the one line printed at the end.
func votesSummary(r votesload.Result, options []string, queueURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %s votes on poll %s", votesCommas(r.Sent), r.PollID)
	if r.Duplicates > 0 {
		fmt.Fprintf(&b, " (+%s duplicates)", votesCommas(r.Duplicates))
	}
	if r.Failed > 0 {
		fmt.Fprintf(&b, ", %s failed", votesCommas(r.Failed))
	}
	fmt.Fprintf(&b, " to %s in %s", queueURL, r.Elapsed.Round(time.Millisecond))
	if s := r.Elapsed.Seconds(); s > 0 {
		fmt.Fprintf(&b, " (%s/s)", votesCommas(int(float64(r.Sent+r.Duplicates)/s)))
	}
	for i, opt := range options {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %s", sep, opt, votesCommas(r.PerOption[opt]))
	}
	return b.String()
}

// votesProgressBar redraws one line in place, at most ten times a second:
// [#####-----] 5,000/20,000 votes  1,234/s  dup 512
type votesProgressBar struct {
	w                 io.Writer
	start, last       time.Time
	sent, dups, total int
	width             int // of the line last drawn, to blank what is left of it
	updated           bool
}

func (p *votesProgressBar) update(sent, dups, total int) {
	p.sent, p.dups, p.total, p.updated = sent, dups, total, true
	if now := time.Now(); sent == total || now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.draw()
	}
}

func (p *votesProgressBar) draw() {
	const cells = 20
	filled := 0
	if p.total > 0 {
		filled = min(cells*p.sent/p.total, cells)
	}
	rate := 0
	if s := time.Since(p.start).Seconds(); s > 0 {
		rate = int(float64(p.sent) / s)
	}
	line := fmt.Sprintf("[%s%s] %s/%s votes  %s/s  dup %s", strings.Repeat("#", filled), strings.Repeat("-", cells-filled),
		votesCommas(p.sent), votesCommas(p.total), votesCommas(rate), votesCommas(p.dups))
	pad := max(p.width-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// finish draws the last state and ends the line.
func (p *votesProgressBar) finish() {
	if !p.updated {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

// votesIsTerminal reports whether w is a terminal (a character device).
func votesIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// votesCommas writes n with thousands separators: 20000 → "20,000".
func votesCommas(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
