package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archives3"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/votes/votess3"
)

// retiredMonth is a ledger month the archive records as retired.
type retiredMonth struct {
	month  string
	at     time.Time // when its archive was verified
	closes time.Time // when its fence closed (its end plus the grace)
}

// ledgerMonths is the local stack's ledger months as the clock command
// sees them: their record of retirement, and what reopening one removes.
type ledgerMonths struct {
	root, state string
	prefix      string // <stack>-votes
	bucket      string // the archive
	counters    string // the counters table: the tally's checkpoints
	grace       time.Duration
	s3          *s3.Client
	ddb         *dynamodb.Client
}

// openLedgerMonths reads the stack's local.env for its ledger and archive,
// with the local stack's own credentials (a rehearsal's reset is the
// stack's, not an operator's).
func openLedgerMonths(ctx context.Context, root, state string) (*ledgerMonths, error) {
	getenv, err := stackEnv(root, state, asAdmin)
	if err != nil {
		return nil, err
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return nil, err
	}
	lm := &ledgerMonths{root: root, state: state, prefix: getenv("LEDGER_TABLE_PREFIX"),
		bucket: first(getenv, "ARCHIVE_BUCKET", "ARCHIVE_BUCKET_NAME"), counters: first(getenv, "COUNTERS_TABLE", "COUNTERS_TABLE_NAME"),
		grace: 2 * ledger.Day, s3: awsenv.S3(cfg), ddb: awsenv.DynamoDB(cfg)}
	if lm.prefix == "" || lm.bucket == "" || lm.counters == "" {
		return nil, fmt.Errorf("the stack's local.env names no ledger prefix, archive bucket or counters table: restart it with `ddbpipe local up`")
	}
	if days, err := parseDays(getenv("ARCHIVE_GRACE_DAYS") + "d"); err == nil && days > 0 {
		lm.grace = days
	}
	return lm, nil
}

// retiredOpen lists the months the archive records as retired although
// the clock at t still has them open (t before their fence closes): their
// votes are rejected month-closed and the rotator does not create their
// tables again. It looks at t's month and the one before, up to the latest
// of t and until.
func (lm *ledgerMonths) retiredOpen(ctx context.Context, t, until time.Time) ([]retiredMonth, error) {
	ret := &votess3.Retirements{S3: lm.s3, Bucket: lm.bucket, Table: lm.prefix}
	last := ledger.MonthOf(until)
	if t.After(until) {
		last = ledger.MonthOf(t)
	}
	m, err := ledger.Add(ledger.MonthOf(t), -1)
	if err != nil {
		return nil, err
	}
	var out []retiredMonth
	for ; m <= last; m, _ = ledger.Add(m, 1) {
		closes, err := ledger.ClosesAt(m, lm.grace)
		if err != nil {
			return nil, err
		}
		if !t.Before(closes) {
			continue
		}
		at, retired, err := ret.Retired(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("was %s retired: %w", m, err)
		}
		if retired {
			out = append(out, retiredMonth{month: m, at: at, closes: closes})
		}
	}
	return out, nil
}

// reopen starts month m over on the local stack: its archive (files and
// manifest, the record of its retirement) and the tally's checkpoints of
// its table are removed, then the rotator's run creates and subscribes
// its table again, empty. The polls' totals keep the votes the month
// counted before.
func (lm *ledgerMonths) reopen(ctx context.Context, months []retiredMonth, w io.Writer) error {
	for _, r := range months {
		p := archive.Partition{Table: lm.prefix, Month: r.month}
		files, err := archives3.ListFiles(ctx, lm.s3, lm.bucket, p.Prefix())
		if err != nil {
			return err
		}
		for start := 0; start < len(files); start += 1000 {
			var ids []s3types.ObjectIdentifier
			for _, f := range files[start:min(start+1000, len(files))] {
				ids = append(ids, s3types.ObjectIdentifier{Key: aws.String(f.Key)})
			}
			out, err := lm.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(lm.bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
			if err == nil && len(out.Errors) > 0 {
				err = fmt.Errorf("%s: %s", aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
			}
			if err != nil {
				return fmt.Errorf("remove the archive of %s: %w", r.month, err)
			}
		}
		n, err := lm.dropCheckpoints(ctx, ledger.TableName(lm.prefix, r.month))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "reopened %s: its archive (%d files) and the tally's %d checkpoints removed\n", r.month, len(files), n)
	}
	rot, _, err := stackRotation(ctx, lm.root, lm.state, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	rep := rot.Run(ctx)
	for _, name := range rep.Created {
		fmt.Fprintf(w, "created %s\n", name)
	}
	return rep.Err()
}

// dropCheckpoints deletes the tally's checkpoints of a ledger table, so a
// table created again under its name starts its count at zero.
func (lm *ledgerMonths) dropCheckpoints(ctx context.Context, table string) (int, error) {
	pk := ledger.CheckpointPK(table)
	p := dynamodb.NewQueryPaginator(lm.ddb, &dynamodb.QueryInput{
		TableName: aws.String(lm.counters), KeyConditionExpression: aws.String("pk = :pk"), ProjectionExpression: aws.String("pk, sk"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: pk}},
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("the tally's checkpoints of %s: %w", table, err)
		}
		for _, it := range page.Items {
			if _, err := lm.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(lm.counters), Key: map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
				return n, fmt.Errorf("remove a checkpoint of %s: %w", table, err)
			}
			n++
		}
	}
	return n, nil
}
