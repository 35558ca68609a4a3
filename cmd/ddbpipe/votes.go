package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// The identities the CLI's commands sign as on a local stack that judges
// IAM: the template's managed policies (ProducerPolicy, OperatorPolicy,
// AnalystPolicy), which is what a producer, an operator and an analyst
// attach on AWS.
const (
	asProducer = "producer"
	asOperator = "operator"
	asAnalyst  = "analyst"
	// The API's callers: ApiReadPolicy reads documents and results,
	// ApiInvokePolicy may also write (execute-api:Invoke per route).
	asAPIRead   = "api-read"
	asAPIInvoke = "api-invoke"
	asAdmin     = "" // the credentials as they are
)

// asIdentity makes getenv's AWS_ACCESS_KEY_ID the identity's key of a local
// stack that judges IAM (its local.env: DDBPIPE_IAM=on and
// DDBPIPE_IAM_KEY_<IDENTITY>), when the credentials in use are that
// stack's own (the identity's key extends the admin's). Anywhere else,
// against AWS in particular, the credentials stay what the environment
// says.
func asIdentity(getenv func(string) string, identity string) func(string) string {
	if identity == asAdmin || getenv("DDBPIPE_IAM") != "on" {
		return getenv
	}
	admin := getenv("AWS_ACCESS_KEY_ID")
	key := getenv("DDBPIPE_IAM_KEY_" + strings.ToUpper(identity))
	if admin == "" || !strings.HasPrefix(key, admin+"As") {
		return getenv
	}
	return func(k string) string {
		if k == "AWS_ACCESS_KEY_ID" {
			return key
		}
		return getenv(k)
	}
}

// stackEnv looks names up in the process environment first, then in the
// local stack's local.env (when there is one), so the same commands work
// against AWS (export COUNTERS_TABLE_NAME=...) and locally. On a local
// stack that judges IAM, the AWS credentials are identity's (asIdentity).
func stackEnv(root, state, identity string) (func(string) string, error) {
	vars := map[string]string{}
	dir, err := stateFolder(root, state)
	if err == nil {
		if v, err := loadEnvFile(filepath.Join(dir, "local.env")); err == nil {
			vars = v
		}
	}
	return asIdentity(func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return vars[k]
	}, identity), nil
}

// votesStore opens the votes store named by the flags or the environment.
func votesStore(ctx context.Context, root, state, table string) (*votesddb.Votes, error) {
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil {
		return nil, err
	}
	if table == "" {
		table = getenv("COUNTERS_TABLE_NAME")
	}
	if table == "" {
		return nil, errors.New("no counters table: pass -table, export COUNTERS_TABLE_NAME, or run `ddbpipe local up`")
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return votesddb.New(awsenv.DynamoDB(cfg), table, getenv("LEDGER_TABLE_PREFIX")), nil
}

func pollsCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("polls create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	table := fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)")
	id := fs.String("poll", "", "poll id (required)")
	options := fs.String("options", "", "comma-separated option ids (required)")
	shards := fs.Int("shards", 0, "write shards of each counter (default: the stack's CounterShards, $COUNTER_SHARDS; 10 when unknown)")
	one := fs.Bool("one-vote-per-voter", false, "reject a second vote by the same voter")
	opens := fs.String("opens", "", "RFC 3339 time the poll opens (default: now)")
	closes := fs.String("closes", "", "RFC 3339 time the poll closes (default: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !flagSet(fs, "shards") {
		*shards = stackShards(*root, *state)
	}
	p := votes.Poll{ID: *id, Shards: *shards, OneVotePerVoter: *one}
	if *options != "" {
		for _, o := range strings.Split(*options, ",") {
			p.Options = append(p.Options, strings.TrimSpace(o))
		}
	}
	for _, tf := range []struct {
		flag, v string
		dst     *time.Time
	}{{"-opens", *opens, &p.Opens}, {"-closes", *closes, &p.Closes}} {
		if tf.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, tf.v)
		if err != nil {
			return fmt.Errorf("%s %q: want an RFC 3339 time like 2026-12-01T00:00:00Z", tf.flag, tf.v)
		}
		*tf.dst = t.UTC()
	}
	if err := p.Validate(); err != nil {
		return err
	}
	store, err := votesStore(ctx, *root, *state, *table)
	if err != nil {
		return err
	}
	if err := store.CreatePoll(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "poll %s created: %d options, %d shards\n", p.ID, len(p.Options), p.Shards)
	return nil
}

// defaultShards is the template's CounterShards default, for a stack that
// does not say its own.
const defaultShards = 10

// stackShards is the shards a poll takes when created without -shards: the
// stack's CounterShards (output, $COUNTER_SHARDS), as POST /polls takes it.
func stackShards(root, state string) int {
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil {
		return defaultShards
	}
	if n, err := strconv.Atoi(getenv("COUNTER_SHARDS")); err == nil && n > 0 {
		return n
	}
	return defaultShards
}

// flagSet reports whether the command line gave flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// pollsFlags are what `polls ls` and `polls get` share.
type pollsFlags struct {
	fs                 *flag.FlagSet
	root, state, table *string
	asJSON             *bool
}

func newPollsFlags(name string, stderr io.Writer) *pollsFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &pollsFlags{fs: fs,
		root:   fs.String("root", "", "repository root"),
		state:  fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)"),
		table:  fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)"),
		asJSON: fs.Bool("json", false, "print JSON (one poll object, or an array of them)"),
	}
}

func pollsLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newPollsFlags("polls ls", stderr)
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("polls ls takes no arguments, got %q", f.fs.Arg(0))
	}
	store, err := votesStore(ctx, *f.root, *f.state, *f.table)
	if err != nil {
		return err
	}
	ps, err := store.AllPolls(ctx)
	if err != nil {
		return err
	}
	if *f.asJSON {
		if ps == nil {
			ps = []votes.Poll{}
		}
		return json.NewEncoder(stdout).Encode(ps)
	}
	if len(ps) == 0 {
		fmt.Fprintln(stdout, "no polls yet: create one with `ddbpipe polls create -poll P -options a,b`")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLL\tOPTIONS\tSHARDS\tONE VOTE PER VOTER\tCREATED\tOPENS\tCLOSES")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.ID, strings.Join(p.Options, ","), p.Shards, yesNo(p.OneVotePerVoter),
			timeOr(p.CreatedAt, "-"), timeOr(p.Opens, "at creation"), timeOr(p.Closes, "never"))
	}
	return tw.Flush()
}

func pollsGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newPollsFlags("polls get", stderr)
	id := f.fs.String("poll", "", "poll id (or give it as the argument)")
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *id == "" && f.fs.NArg() == 1:
		*id = f.fs.Arg(0)
	case *id == "" && f.fs.NArg() == 0:
		return errors.New("want a poll id: polls get P (`ddbpipe polls ls` lists them)")
	case f.fs.NArg() > 0:
		return fmt.Errorf("want one poll id, got %q", append([]string{*id}, f.fs.Args()...))
	}
	store, err := votesStore(ctx, *f.root, *f.state, *f.table)
	if err != nil {
		return err
	}
	p, err := store.Poll(ctx, *id)
	if errors.Is(err, votes.ErrNoPoll) {
		return fmt.Errorf("no poll %q (`ddbpipe polls ls` lists the polls)", *id)
	}
	if err != nil {
		return err
	}
	if *f.asJSON {
		return json.NewEncoder(stdout).Encode(p)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "poll\t%s\n", p.ID)
	fmt.Fprintf(tw, "options\t%s\n", strings.Join(p.Options, ", "))
	fmt.Fprintf(tw, "shards\t%d\n", p.Shards)
	fmt.Fprintf(tw, "one vote per voter\t%s\n", yesNo(p.OneVotePerVoter))
	fmt.Fprintf(tw, "created\t%s\n", timeOr(p.CreatedAt, "-"))
	fmt.Fprintf(tw, "opens\t%s\n", timeOr(p.Opens, "at creation"))
	fmt.Fprintf(tw, "closes\t%s\n", timeOr(p.Closes, "never"))
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func timeOr(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return t.UTC().Format(time.RFC3339)
}

func votesResults(ctx context.Context, args []string, stdout, stderr io.Writer) (retErr error) {
	fs := flag.NewFlagSet("votes results", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "repository root")
	state := fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)")
	table := fs.String("table", "", "counters table (default: $COUNTERS_TABLE_NAME or the local stack's)")
	id := fs.String("poll", "", "poll id (required)")
	asJSON := fs.Bool("json", false, `print {"pollId":...,"totals":{...},"total":n,"rejected":{reason:n}}`)
	wait := fs.Duration("wait", 0, "first wait, up to this long (e.g. 1m), until the votes queue is empty and the tally has counted every record of the open months' ledgers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("-poll is required")
	}
	store, err := votesStore(ctx, *root, *state, *table)
	if err != nil {
		return err
	}
	if _, err := store.Poll(ctx, *id); errors.Is(err, votes.ErrNoPoll) {
		return fmt.Errorf("no poll %q (`ddbpipe polls ls` lists the polls)", *id)
	}
	// A wait that runs out still prints the totals, then says so.
	waitErr := waitCaughtUp(ctx, *root, *state, catchUp{queue: true, counted: true}, *wait, stderr)
	if errors.Is(waitErr, context.Canceled) {
		return waitErr
	}
	t, err := votes.Results(ctx, store, *id, time.Now)
	if errors.Is(err, votes.ErrNoPoll) {
		return fmt.Errorf("no poll %q (`ddbpipe polls ls` lists the polls)", *id)
	}
	if err != nil {
		return err
	}
	defer func() {
		if waitErr != nil && retErr == nil {
			retErr = waitErr
		}
	}()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			PollID   string                 `json:"pollId"`
			Totals   map[string]int64       `json:"totals"`
			Total    int64                  `json:"total"`
			Rejected map[votes.Reason]int64 `json:"rejected"`
		}{t.PollID, t.Totals, t.Total, t.Rejected})
	}
	opts := make([]string, 0, len(t.Totals))
	for o := range t.Totals {
		opts = append(opts, o)
	}
	sort.Slice(opts, func(i, j int) bool {
		return t.Totals[opts[i]] > t.Totals[opts[j]] || t.Totals[opts[i]] == t.Totals[opts[j]] && opts[i] < opts[j]
	})
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "poll %s (%d shards read)\n", t.PollID, t.Shards)
	for _, o := range opts {
		share := 0.0
		if t.Total > 0 {
			share = 100 * float64(t.Totals[o]) / float64(t.Total)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.1f%%\n", o, t.Totals[o], share)
	}
	fmt.Fprintf(tw, "  total\t%d\t\n", t.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Rejected) > 0 { // votes that named this poll and will never count
		fmt.Fprintf(stdout, "%s: `ddbpipe votes rejected -poll %s` shows the latest\n", rejectCounts(t.Rejected), t.PollID)
	}
	fmt.Fprintln(stdout, inFlight(ctx, t.Counters, *root, *state))
	return nil
}

// inFlight says how current the totals are: when the tally last counted,
// and how many messages the votes queue still holds (when this caller may
// read its attributes), so that a 0 right after a send is not a surprise.
func inFlight(ctx context.Context, s votes.Staleness, root, state string) string {
	line := "nothing counted yet in the open months"
	if !s.CountedAt.IsZero() {
		line = fmt.Sprintf("counted up to %s (%s ago; votes reach the counters %.1fs after the ledger)",
			s.CountedAt.UTC().Format(time.RFC3339), time.Since(s.CountedAt).Round(time.Second), s.LagSeconds)
	}
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil || getenv("VOTES_QUEUE_URL") == "" {
		return line
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return line
	}
	waiting, taken, err := votessqs.Depth(ctx, sqs.NewFromConfig(cfg), getenv("VOTES_QUEUE_URL"))
	if err != nil {
		return line
	}
	if waiting+taken > 0 {
		line += fmt.Sprintf("; about %d votes are still in the votes queue (%d being counted), not in these totals yet", waiting+taken, taken)
	}
	return line
}
