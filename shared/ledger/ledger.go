// Package ledger is the vote ledger's contract: the one place that says
// which month a time falls in, how a month's table is named, when a month
// opens, stops taking votes (the fence) and turns cold, what a ledger item
// and a tally checkpoint hold (their attribute names, item.go), how stream
// sequence numbers order, where the tally keeps its checkpoints, and which
// table a stream belongs to. The votes flow, the archive, the CLI, the
// local stack, the bench and the soak all import it, so the rule that no
// vote lands after a month is verified rests on one definition, and a
// reader of a ledger item or a checkpoint reads what its writer wrote.
package ledger

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Layout is how a ledger month is written: YYYY-MM.
const Layout = "2006-01"

// Day is one day of grace: graces are durations, a number of days in the
// configuration.
const Day = 24 * time.Hour

// ErrBadMonth: a month that is not YYYY-MM.
var ErrBadMonth = errors.New("ledger: month is not YYYY-MM")

// ErrBadStreamARN: a string that is not a DynamoDB stream ARN.
var ErrBadStreamARN = errors.New("ledger: not a DynamoDB stream ARN")

// MonthOf is the ledger month (UTC) of t.
func MonthOf(t time.Time) string { return t.UTC().Format(Layout) }

// Opens is the first instant of month m, in UTC.
func Opens(m string) (time.Time, error) {
	t, err := time.Parse(Layout, m)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q", ErrBadMonth, m)
	}
	return t.UTC(), nil
}

// End is the first instant after the month of t.
func End(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0)
}

// Add moves month m by n months (n may be negative).
func Add(m string, n int) (string, error) {
	t, err := Opens(m)
	if err != nil {
		return "", err
	}
	return t.AddDate(0, n, 0).Format(Layout), nil
}

// ClosesAt is when month m's ledger stops taking votes (the fence): its
// end plus the grace, in which late votes still count.
func ClosesAt(m string, grace time.Duration) (time.Time, error) {
	t, err := Opens(m)
	if err != nil {
		return time.Time{}, err
	}
	return End(t).Add(grace), nil
}

// ColdAt is when month m turns cold: the fence, plus the margin that
// outlasts any write that passed the fence (a counter invocation, clock
// error). Only then may the month be verified and its table deleted.
func ColdAt(m string, grace, margin time.Duration) (time.Time, error) {
	t, err := ClosesAt(m, grace)
	if err != nil {
		return time.Time{}, err
	}
	return t.Add(margin), nil
}

// TableName is month m's ledger table: <prefix>-YYYY-MM.
func TableName(prefix, m string) string { return prefix + "-" + m }

var monthlySuffix = regexp.MustCompile(`^(.+)-(\d{4})-(0[1-9]|1[0-2])$`)

// SplitTable reports whether a table name ends in -YYYY-MM (a monthly
// table, as "ddbpipe-votes-2026-11"), with its prefix and month.
func SplitTable(name string) (prefix, m string, ok bool) {
	s := monthlySuffix.FindStringSubmatch(name)
	if s == nil {
		return "", "", false
	}
	return s[1], s[2] + "-" + s[3], true
}

// CheckpointPK is the partition key under which the tally keeps the
// checkpoints of a ledger table's stream shards (one item per shard, the
// sort key its shard id); the rotator reads them to know what was counted.
func CheckpointPK(table string) string { return checkpointPrefix + table }

// IsCheckpointPK reports whether a partition key is one of the tally's
// checkpoint keys (CheckpointPK), of whichever ledger table.
func IsCheckpointPK(pk string) bool { return strings.HasPrefix(pk, checkpointPrefix) }

const checkpointPrefix = "ckpt#"

// StreamTable splits a DynamoDB stream ARN,
// arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>, into its
// table name and stream label.
func StreamTable(arn string) (table, label string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "dynamodb" {
		return "", "", fmt.Errorf("%w: %q", ErrBadStreamARN, arn)
	}
	rest, ok := strings.CutPrefix(parts[5], "table/")
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadStreamARN, arn)
	}
	table, label, ok = strings.Cut(rest, "/stream/")
	if !ok || table == "" || label == "" || strings.Contains(table, "/") {
		return "", "", fmt.Errorf("%w: %q", ErrBadStreamARN, arn)
	}
	return table, label, nil
}
