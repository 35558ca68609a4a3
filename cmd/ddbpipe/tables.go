package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveesm"
	"github.com/ddbpipe/ddbpipe/shared/archive/archivelambda"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
)

// tables dispatches `tables rotate` and `tables ls`.
func tables(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "rotate":
			return tablesRotate(ctx, args[1:], stdout, stderr)
		case "ls":
			return tablesLs(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, "usage: ddbpipe tables rotate [-now 2026-12-03T00:00:00Z] [-json] [-grace-days N] [-drain-wait D]")
	fmt.Fprintln(stderr, "       ddbpipe tables ls [-now T]")
	return errUsage
}

// tablesCommand is what `tables rotate` and `tables ls` share: the stack's
// variables (environment first, then the local stack's local.env) and the
// rotator's configuration from them.
type tablesCommand struct {
	fs          *flag.FlagSet
	root, state *string
	grace       *int
}

func newTablesCommand(name string, stderr io.Writer) *tablesCommand {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &tablesCommand{
		fs: fs, root: fs.String("root", "", "repository root"), state: fs.String("state-dir", "", "the state folder of ddbpipe local up (default: <root>/.ddbpipe)"),
		grace: fs.Int("grace-days", -1, "days after a month's end before it is retired, 1 to 27 (default $ARCHIVE_GRACE_DAYS, else 2)"),
	}
}

// first returns the first variable set among names.
func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// rotator builds the rotator the function runs, configured from the
// function's variables or the stack's outputs (local.env).
func (c *tablesCommand) rotator(ctx context.Context, log *slog.Logger) (*archive.Rotator, archivelambda.RotatorConfig, error) {
	if g := *c.grace; g != -1 && (g < 1 || g > 27) {
		// The template's ArchiveGraceDays bounds: a month retired at its
		// very end would leave late votes and the stream no time.
		return nil, archivelambda.RotatorConfig{}, fmt.Errorf("-grace-days %d: want 1 to 27 days, as the template's ArchiveGraceDays", g)
	}
	return stackRotation(ctx, *c.root, *c.state, *c.grace, log)
}

// stackRotation builds the rotator of the stack the environment (or
// local.env) names; grace > 0 overrides its grace days.
func stackRotation(ctx context.Context, root, state string, grace int, log *slog.Logger) (*archive.Rotator, archivelambda.RotatorConfig, error) {
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil {
		return nil, archivelambda.RotatorConfig{}, err
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return nil, archivelambda.RotatorConfig{}, err
	}
	num := func(def int, names ...string) int {
		if n, err := strconv.Atoi(first(getenv, names...)); err == nil {
			return n
		}
		return def
	}
	rc := archivelambda.RotatorConfig{
		LedgerPrefix:        getenv("LEDGER_TABLE_PREFIX"),
		Bucket:              first(getenv, "ARCHIVE_BUCKET", "ARCHIVE_BUCKET_NAME"),
		GraceDays:           num(2, "ARCHIVE_GRACE_DAYS"),
		Archiver:            first(getenv, "ARCHIVER_FUNCTION", "ARCHIVER_FUNCTION_ARN"),
		FailureQueueARN:     getenv("STREAM_FAILURES_QUEUE_ARN"),
		MaxRetryAttempts:    num(5, "STREAM_MAX_RETRY_ATTEMPTS"),
		MaxRecordAgeSeconds: num(21600, "STREAM_MAX_RECORD_AGE_SECONDS"),
		WindowSeconds:       num(10, "ARCHIVE_BATCHING_WINDOW_SECONDS"),
		Tally:               first(getenv, "TALLY_FUNCTION", "TALLY_FUNCTION_ARN"),
		TallyWindowSeconds:  num(60, "TALLY_WINDOW_SECONDS"),
		TallyBatchWindow:    num(1, "TALLY_BATCHING_WINDOW_SECONDS"),
		CountersTable:       first(getenv, "COUNTERS_TABLE", "COUNTERS_TABLE_NAME"),
		// Unset: the rotation's defaults, as the template's.
		WarmWriteMin: num(0, "LEDGER_WARM_WRITE_UNITS_MIN"),
		WarmWriteMax: num(0, "LEDGER_WARM_WRITE_UNITS_MAX"),
		WarmReadMin:  num(0, "LEDGER_WARM_READ_UNITS_MIN"),
		WarmReadMax:  num(0, "LEDGER_WARM_READ_UNITS_MAX"),
	}
	if grace > 0 {
		rc.GraceDays = grace
	}
	if rc.FailureQueueARN == "" {
		if url := getenv("STREAM_FAILURES_QUEUE_URL"); url != "" {
			out, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
			})
			if err != nil {
				return nil, rc, fmt.Errorf("the stream failures queue's ARN: %w", err)
			}
			rc.FailureQueueARN = out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		}
	}
	var missing []string
	for _, v := range []struct{ name, value string }{
		{"LEDGER_TABLE_PREFIX", rc.LedgerPrefix}, {"ARCHIVE_BUCKET_NAME", rc.Bucket},
		{"ARCHIVER_FUNCTION_ARN", rc.Archiver}, {"STREAM_FAILURES_QUEUE_ARN", rc.FailureQueueARN},
		{"TALLY_FUNCTION_ARN", rc.Tally}, {"COUNTERS_TABLE_NAME", rc.CountersTable},
	} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return nil, rc, fmt.Errorf("%s not set: export them, or run `ddbpipe local up`", strings.Join(missing, ", "))
	}
	r := archivelambda.NewRotation(cfg, rc, log)
	// The functions' clock: the real one, or a local stack's moved clock
	// (DDBPIPE_CLOCK_FILE in its local.env), as the rotator function reads it.
	vars := lambdafn.NewVars(getenv)
	r.Clock = vars.Clock()
	if err := vars.Err(); err != nil {
		return nil, rc, err
	}
	r.Now = r.Clock
	return r, rc, nil
}

func tablesRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newTablesCommand("tables rotate", stderr)
	nowFlag := c.fs.String("now", "", "rotate as if it were this RFC 3339 time, e.g. 2026-12-03T00:00:00Z (default: the clock)")
	drainWait := c.fs.Duration("drain-wait", 5*time.Minute, "longest wait for a cold table's stream to drain into the archive")
	asJSON := c.fs.Bool("json", false, "print the run's report as JSON")
	verbose := c.fs.Bool("v", false, "print the rotator's log lines (warnings such as a feature the local DynamoDB lacks) on stderr")
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	// The report says what each step did; the log's warnings repeat it,
	// or name features only AWS has, so they show only when asked for.
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	r, rc, err := c.rotator(ctx, log)
	if err != nil {
		return err
	}
	// -now plans the run; the counters fence months by the functions'
	// clock (r.Clock), so a month is retired only once it is cold by that
	// clock too.
	now := r.Clock().UTC()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return fmt.Errorf("-now %q: want an RFC 3339 time like 2026-12-03T00:00:00Z", *nowFlag)
		}
		now = t.UTC()
	}
	r.Now = func() time.Time { return now }
	r.Policy.DrainWait = *drainWait
	r.Holder = operatorRun()
	if !*asJSON {
		days := "days"
		if rc.GraceDays == 1 {
			days = "day"
		}
		fmt.Fprintf(stdout, "rotating %s-YYYY-MM at %s (grace %d %s)\n", rc.LedgerPrefix, now.Format(time.RFC3339), rc.GraceDays, days)
		r.OnStep = func(table string, s archive.StepResult) {
			mark := "ok"
			detail := s.Detail
			if s.Err != nil {
				mark, detail = "FAILED", s.Err.Error()
			}
			fmt.Fprintf(stdout, "  %-28s %-11s %-6s %s (%s)\n", table, s.Step, mark, detail, s.Took.Round(time.Millisecond))
		}
	}
	start := time.Now()
	rep := r.Run(ctx)
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(reportJSON(rep)); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "done in %s: %d created, %d subscribed, %d retired, %d alarms, %d failed\n",
			time.Since(start).Round(time.Millisecond), len(rep.Created), len(rep.Subscribed), rep.Retired(), rep.Alarms(), rep.FailedSteps())
		for _, t := range rep.Retirements {
			fmt.Fprintf(stdout, "  %s: %s\n", t.Table, t.Outcome)
		}
	}
	if rep.Alarms() > 0 && rep.Err() == nil {
		return errors.New("a cold month's archive did not match its table (see above); the table was kept")
	}
	return rep.Err()
}

// operatorRun names this run in the month's leases: another run that
// finds a month held prints it.
func operatorRun() string {
	who := "an operator"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		who += "@" + h
	}
	return fmt.Sprintf("ddbpipe tables rotate (%s, pid %d)", who, os.Getpid())
}

type stepJSON struct {
	Step   string `json:"step"`
	Detail string `json:"detail,omitempty"`
	Ms     int64  `json:"ms"`
	Error  string `json:"error,omitempty"`
}

type retirementJSON struct {
	Table          string     `json:"table"`
	Outcome        string     `json:"outcome"`
	Steps          []stepJSON `json:"steps"`
	Verification   string     `json:"verification,omitempty"`
	Reverification string     `json:"reverification,omitempty"`
	FilesBefore    int        `json:"filesBefore,omitempty"`
	FilesAfter     int        `json:"filesAfter,omitempty"`
	LagSeconds     float64    `json:"lagSeconds"`
	// Counters: the votes the tally counted of the month and how many
	// more than the month's items (negative: fewer); absent when not compared.
	Counters *countersJSON `json:"counters,omitempty"`
	// HeldBy: the run that holds the month (outcome held-by-another-run);
	// TookOver: the stopped run whose lapsed lease this one took over.
	HeldBy   *leaseJSON `json:"heldBy,omitempty"`
	TookOver *leaseJSON `json:"tookOver,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// leaseJSON is another run's lease of a month.
type leaseJSON struct {
	Holder  string    `json:"holder"`
	Since   time.Time `json:"since"`
	Step    string    `json:"step,omitempty"`
	Expires time.Time `json:"expires"`
}

func leaseOf(l archive.Lease) *leaseJSON {
	if l.IsZero() {
		return nil
	}
	return &leaseJSON{Holder: l.Holder, Since: l.Since, Step: string(l.Step), Expires: l.Expires}
}

type countersJSON struct {
	Tallied int64 `json:"tallied"`
	Items   int64 `json:"items"`
	Differ  int64 `json:"differ"`
}

// heldJSON is a table a run left alone (kept, or not created), and why.
type heldJSON struct {
	Table  string `json:"table"`
	Reason string `json:"reason"`
}

func heldList(hs []archive.Held) []heldJSON {
	out := []heldJSON{}
	for _, h := range hs {
		out = append(out, heldJSON{Table: h.Table, Reason: h.Reason})
	}
	return out
}

func reportJSON(rep archive.RotationReport) any {
	out := struct {
		Now         time.Time        `json:"now"`
		Created     []string         `json:"created"`
		Warmed      []string         `json:"warmed"`
		Subscribed  []string         `json:"subscribed"`
		Retirements []retirementJSON `json:"retirements"`
		Kept        []heldJSON       `json:"kept"`
		Deferred    []heldJSON       `json:"deferred"`
		Errors      []string         `json:"errors,omitempty"`
	}{Now: rep.Now, Created: append([]string{}, rep.Created...), Warmed: append([]string{}, rep.Warmed...), Subscribed: append([]string{}, rep.Subscribed...),
		Retirements: []retirementJSON{}, Kept: heldList(rep.Kept), Deferred: heldList(rep.Deferred)}
	for _, e := range rep.Errors {
		out.Errors = append(out.Errors, e.Error())
	}
	for _, t := range rep.Retirements {
		rj := retirementJSON{Table: t.Table, Outcome: string(t.Outcome), LagSeconds: t.LagSeconds}
		for _, s := range t.Steps {
			sj := stepJSON{Step: string(s.Step), Detail: s.Detail, Ms: s.Took.Milliseconds()}
			if s.Err != nil {
				sj.Error = s.Err.Error()
			}
			rj.Steps = append(rj.Steps, sj)
		}
		if t.Verification != nil {
			rj.Verification = t.Verification.String()
		}
		if t.Reverification != nil {
			rj.Reverification = t.Reverification.String()
		}
		if t.Compaction != nil {
			rj.FilesBefore, rj.FilesAfter = t.Compaction.FilesBefore, t.Compaction.FilesAfter
		}
		if c := t.Counters; c != nil {
			rj.Counters = &countersJSON{Tallied: c.Tallied, Items: c.Items, Differ: c.Differ()}
		}
		rj.HeldBy, rj.TookOver = leaseOf(t.HeldBy), leaseOf(t.TookOver)
		if t.Err != nil {
			rj.Error = t.Err.Error()
		}
		out.Retirements = append(out.Retirements, rj)
	}
	return out
}

func tablesLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newTablesCommand("tables ls", stderr)
	nowFlag := c.fs.String("now", "", "classify months as of this RFC 3339 time (default: the clock)")
	wait := c.fs.Duration("wait", 0, "wait up to this long until no month is cold (the rotator's run retired them), e.g. 5m")
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if *wait < 0 {
		return fmt.Errorf("-wait %s: want a duration of 0 or more", *wait)
	}
	var at time.Time
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return fmt.Errorf("-now %q: want an RFC 3339 time", *nowFlag)
		}
		at = t.UTC()
	}
	r, rc, err := c.rotator(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	clock := func() time.Time { return r.Clock().UTC() } // the functions' clock: `local clock` moves it
	if !at.IsZero() {
		clock = func() time.Time { return at }
	}
	deadline, said := time.Now().Add(*wait), time.Time{}
	for {
		tables, phase, cold, err := ledgerPhases(ctx, r, rc.LedgerPrefix, clock())
		if err != nil {
			return err
		}
		if len(cold) == 0 || !time.Now().Before(deadline) {
			if err := printTables(ctx, stdout, r, tables, phase); err != nil || len(cold) == 0 || *wait == 0 {
				return err
			}
			return fmt.Errorf("tables ls: after %s, %s still cold (is the rotator running? ddbpipe tables rotate retires it now)", *wait, strings.Join(cold, ", "))
		}
		if time.Since(said) >= 10*time.Second {
			fmt.Fprintf(stderr, "waiting for the rotator to retire %s\n", strings.Join(cold, ", "))
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// ledgerPhases lists the ledger tables and each one's phase at now, with
// the cold ones (the rotator retires them).
func ledgerPhases(ctx context.Context, r *archive.Rotator, prefix string, now time.Time) (tables []archive.Table, phase map[string]string, cold []string, err error) {
	tables, err = r.Tables.List(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name
	}
	plan := r.Policy.Plan(now, names)
	phase = map[string]string{}
	for i, n := range plan.Ensure {
		phase[n] = map[bool]string{true: "current", false: "ahead"}[i == 0]
	}
	current := ""
	if len(plan.Ensure) > 0 {
		_, current, _ = ledger.SplitTable(plan.Ensure[0])
	}
	for _, n := range plan.Keep {
		// Kept: a past month in its grace period, or a month further ahead.
		phase[n] = "grace"
		if _, m, ok := ledger.SplitTable(n); ok && m > current {
			phase[n] = "ahead"
		}
	}
	for _, n := range plan.Retire {
		phase[n] = "cold: retire"
	}
	return tables, phase, plan.Retire, nil
}

func printTables(ctx context.Context, stdout io.Writer, r *archive.Rotator, tables []archive.Table, phase map[string]string) error {
	readers, _ := r.Subscriptions.(archiveesm.Readers)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tPHASE\tSTATUS\tSTREAM\tSUBSCRIBED\tPROTECTED\tBILLING")
	for _, t := range tables {
		stream := "off"
		if t.StreamEnabled {
			stream = "on"
		}
		subs := subscriptions(ctx, readers, t.StreamARN)
		billing := "on-demand"
		if t.Capacity != nil {
			billing = fmt.Sprintf("provisioned %d/%d", t.Capacity.Read, t.Capacity.Write)
		}
		p := phase[t.Name]
		if p == "" {
			p = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", t.Name, p, t.Status, stream, subs, t.DeletionProtection, billing)
	}
	return tw.Flush()
}

// subscriptions counts the stream readers' mappings of a stream (the
// archiver's and the tally's: 2 when all is well), "-" when it cannot.
func subscriptions(ctx context.Context, readers archiveesm.Readers, streamARN string) string {
	if len(readers) == 0 || streamARN == "" {
		return "-"
	}
	n := 0
	for _, m := range readers {
		l, err := m.List(ctx, streamARN)
		if err != nil {
			return "-"
		}
		for _, e := range l {
			if aws.ToString(e.State) != "Deleting" {
				n++
			}
		}
	}
	return strconv.Itoa(n)
}
