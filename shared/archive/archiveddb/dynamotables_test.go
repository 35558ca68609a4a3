package archiveddb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var seq atomic.Int64

func localTables(t *testing.T) (*Tables, *Streams, *dynamodb.Client) {
	t.Helper()
	st := stacktest.Need(t)
	cfg := stacktest.Config(t, st, nil)
	db := awsenv.DynamoDB(cfg)
	return &Tables{DB: db, Local: awsenv.Overridden(cfg, "DynamoDB"), Log: nil}, &Streams{API: dynamodbstreams.NewFromConfig(cfg)}, db
}

func TestCreateInputMatchesTheLedger(t *testing.T) {
	in := CreateInput(archive.Spec{Name: "x-votes-2026-12", Tags: map[string]string{"b": "2", "a": "1"}})
	if in.BillingMode != types.BillingModePayPerRequest || in.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages ||
		!aws.ToBool(in.DeletionProtectionEnabled) || aws.ToString(in.Tags[0].Key) != "a" {
		t.Errorf("create input %+v", in)
	}
	if got := aws.ToString(in.KeySchema[0].AttributeName) + "/" + aws.ToString(in.KeySchema[1].AttributeName); got != "pk/sk" {
		t.Errorf("key schema %s, want pk/sk (dynamostore's ledger)", got)
	}
	p := CreateInput(archive.Spec{Name: "x", Capacity: &archive.Capacity{Read: 5, Write: 10}})
	if p.BillingMode != types.BillingModeProvisioned || aws.ToInt64(p.ProvisionedThroughput.WriteCapacityUnits) != 10 {
		t.Errorf("provisioned input %+v", p)
	}
}

// The table's life against DynamoDB Local: created with its stream (what
// the server refuses is noted), kept idempotently, scanned in parallel into
// the same state the archive computes, its stream turned off and read to
// the end, unprotected and deleted.
func TestTableLifecycle(t *testing.T) {
	tables, streams, db := localTables(t)
	ctx := context.Background()
	name := fmt.Sprintf("dt-%d-%d-votes-2026-11", time.Now().UnixNano()%1e7, seq.Add(1))
	spec := archive.Spec{Name: name, Month: "2026-11", Tags: map[string]string{"app": "ddbpipe"}}
	tb, created, err := tables.Ensure(ctx, spec)
	if err != nil || !created {
		t.Fatalf("ensure: %v created=%v", err, created)
	}
	// DynamoDB Local has no PITR and no tagging: exactly those two are noted.
	wantNotes := []string{"local DynamoDB has no " + featurePITR + "; skipped", "local DynamoDB has no " + featureTags + "; skipped"}
	if got := tables.Notes(); !reflect.DeepEqual(got, wantNotes) {
		t.Errorf("notes %q, want %q", got, wantNotes)
	}
	if !tb.DeletionProtection {
		t.Error("a created table is not protected against deletion")
	}
	if tb.StreamARN == "" || !tb.StreamEnabled || tb.Capacity != nil {
		t.Errorf("table %+v, want an on-demand table with its stream", tb)
	}
	if _, created, err := tables.Ensure(ctx, spec); err != nil || created {
		t.Errorf("second ensure: %v created=%v", err, created)
	}
	// A table whose name starts like the ledgers' but is no month of theirs
	// (a stack named <base>-dev) is not listed: the rotator's role may not
	// describe it.
	base := name[:len(name)-8]
	other := base + "-dev-counters"
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(other), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	list, err := tables.List(ctx, base)
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Errorf("list %s: %v %+v, want only %s", base, err, list, name)
	}

	const n = 3000
	want := archive.State{}
	var reqs []types.WriteRequest
	flush := func() {
		if len(reqs) == 0 {
			return
		}
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{name: reqs}}); err != nil {
			t.Fatal(err)
		}
		reqs = nil
	}
	for i := range n {
		pk, sk := fmt.Sprintf("vote#p%d", i%7), fmt.Sprintf("v%05d", i)
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
			"n": &types.AttributeValueMemberN{Value: fmt.Sprint(i)}, "tags": &types.AttributeValueMemberSS{Value: []string{"b", "a"}},
		}}})
		item := archive.Item{"pk": pk, "sk": sk, "n": archive.Number(fmt.Sprint(i)), "tags": []string{"b", "a"}}
		key, err := archive.KeyJSON(item, "pk", "sk")
		if err != nil {
			t.Fatal(err)
		}
		if want[key], err = archive.Checksum(item); err != nil {
			t.Fatal(err)
		}
		if len(reqs) == 25 {
			flush()
		}
	}
	flush()
	var reported atomic.Int64
	var calls atomic.Int64
	tables.Progress = func(items int64) {
		calls.Add(1)
		for cur := reported.Load(); items > cur && !reported.CompareAndSwap(cur, items); cur = reported.Load() {
		}
	}
	scan, err := tables.Scan(ctx, name, true)
	tables.Progress = nil
	if err != nil {
		t.Fatal(err)
	}
	if reported.Load() != n || calls.Load() < int64(scan.Segments) {
		t.Errorf("progress: %d items in %d calls, want %d in at least one call per segment", reported.Load(), calls.Load(), n)
	}
	if d, err := tables.Describe(ctx, name); err != nil || d.Name != name || d.StreamARN != tb.StreamARN {
		t.Errorf("describe: %+v %v", d, err)
	}
	if _, err := tables.Describe(ctx, name+"-nope"); !errors.Is(err, archive.ErrNotFound) {
		t.Errorf("describe a missing table: %v, want ErrNotFound", err)
	}
	if rep := archive.Verify(want, scan.State); !rep.OK() || len(scan.Images) != n {
		t.Errorf("scan state: %s; %d images", rep, len(scan.Images))
	}
	t.Logf("parallel scan (%d segments): %d items in %s (%.0f items/s)", scan.Segments, n, scan.Took.Round(time.Millisecond), float64(n)/scan.Took.Seconds())

	if err := tables.DisableStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	// Twice: a stream off already stays off (another run turned it off).
	if err := tables.DisableStream(ctx, name); err != nil {
		t.Fatalf("stream off again: %v, want it left off without an error", err)
	}
	start := time.Now()
	recs, err := streams.Records(ctx, tb.StreamARN)
	if err != nil || len(recs) != n {
		t.Fatalf("stream records: %v, %d, want %d", err, len(recs), n)
	}
	t.Logf("read the disabled stream's %d records in %s", len(recs), time.Since(start).Round(time.Millisecond))
	after, created, err := tables.Ensure(ctx, spec)
	if err != nil || created {
		t.Fatalf("ensure after the stream was turned off: %v created=%v", err, created)
	}
	if after.StreamEnabled || !after.DeletionProtection {
		t.Errorf("table %+v, want its stream off and still protected", after)
	}

	if err := tables.Protect(ctx, name, false); err != nil {
		t.Fatal(err)
	}
	if err := tables.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := tables.Delete(ctx, name); !IsNotFound(err) {
		t.Errorf("second delete: %v, want not found", err)
	}
}

// A protected table refuses deletion: DynamoDB Local keeps deletion
// protection and enforces it as DynamoDB does (ValidationException).
func TestProtectedTableRefusesDelete(t *testing.T) {
	tables, _, _ := localTables(t)
	ctx := context.Background()
	name := fmt.Sprintf("dt-%d-%d-votes-2026-10", time.Now().UnixNano()%1e7, seq.Add(1))
	tb, created, err := tables.Ensure(ctx, archive.Spec{Name: name, Month: "2026-10"})
	if err != nil || !created {
		t.Fatalf("ensure: %v created=%v", err, created)
	}
	if !tb.DeletionProtection {
		t.Fatalf("table %+v, want deletion protection on", tb)
	}
	if err := tables.Delete(ctx, name); !awserr.Is(err, "ValidationException") {
		t.Fatalf("delete of a protected table: %v, want ValidationException", err)
	}
	if err := tables.Protect(ctx, name, false); err != nil {
		t.Fatal(err)
	}
	if err := tables.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// What DynamoDB Local implements, asked directly: deletion protection yes
// (kept and enforced), point-in-time recovery and tagging no, both refused
// with UnknownOperationException — the only answer Tables skips when Local.
// If a new DynamoDB Local implements them, this fails and the skip goes.
func TestLocalServerLacksPITRAndTagging(t *testing.T) {
	_, _, db := localTables(t)
	ctx := t.Context()
	name := fmt.Sprintf("dt-%d-%d-probe", time.Now().UnixNano()%1e7, seq.Add(1))
	if _, err := db.CreateTable(ctx, CreateInput(archive.Spec{Name: name, Tags: map[string]string{"app": "ddbpipe"}})); err != nil {
		t.Fatalf("CreateTable with deletion protection and tags: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)})
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if !aws.ToBool(d.Table.DeletionProtectionEnabled) {
		t.Error("deletion protection not kept")
	}
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)}); err != nil {
		t.Errorf("turn deletion protection off: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"DescribeContinuousBackups", func() error {
			_, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
			return err
		}},
		{"UpdateContinuousBackups", func() error {
			_, err := db.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(name),
				PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)}})
			return err
		}},
		{"TagResource", func() error {
			_, err := db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: d.Table.TableArn, Tags: tagList(map[string]string{"a": "1"})})
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(); !awserr.Is(err, "UnknownOperationException") {
			t.Errorf("%s: %v, want UnknownOperationException", c.name, err)
		}
	}
}

// What DynamoDB Local does with warm throughput, asked directly: CreateTable
// takes WarmThroughput and ignores it, DescribeTable reports none, and an
// UpdateTable of the warm throughput alone is refused with a
// ValidationException "Nothing to update" — the only answer RaiseWarm
// skips when Local. If a new DynamoDB Local implements warm throughput,
// this fails and the skip goes.
func TestLocalServerIgnoresWarmThroughput(t *testing.T) {
	_, _, db := localTables(t)
	ctx := t.Context()
	name := fmt.Sprintf("dt-%d-%d-warm-probe", time.Now().UnixNano()%1e7, seq.Add(1))
	in := CreateInput(archive.Spec{Name: name, Warm: &archive.Warm{Read: 30000, Write: 20000}})
	in.DeletionProtectionEnabled = aws.Bool(false)
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatalf("CreateTable with warm throughput: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Table.WarmThroughput; w != nil {
		t.Errorf("DescribeTable reports warm throughput %+v; the local server has some now", w)
	}
	_, err = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), WarmThroughput: warmInput(&archive.Warm{Write: 30000})})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || ae.ErrorMessage() != "Nothing to update" {
		t.Errorf("UpdateTable of the warm throughput: %v, want ValidationException: Nothing to update", err)
	}
}

// Against DynamoDB Local the rotator's warm throughput is noted and
// skipped: a table created asking for it is created (without it), a
// raise is not an error, and neither is a second.
func TestWarmThroughputSkippedLocally(t *testing.T) {
	tables, _, db := localTables(t)
	ctx := t.Context()
	name := fmt.Sprintf("dt-%d-%d-votes-2026-12", time.Now().UnixNano()%1e7, seq.Add(1))
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)})
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	tb, created, err := tables.Ensure(ctx, archive.Spec{Name: name, Month: "2026-12", Warm: &archive.Warm{Write: 20000}})
	if err != nil || !created {
		t.Fatalf("ensure: %v created=%v", err, created)
	}
	if tb.Warm != nil {
		t.Errorf("table reports warm throughput %v locally", tb.Warm)
	}
	for range 2 {
		if raised, err := tables.RaiseWarm(ctx, name, archive.Warm{Write: 30000}); err != nil || raised {
			t.Errorf("RaiseWarm: raised %v, %v; want skipped", raised, err)
		}
	}
	if want := "local DynamoDB has no " + featureWarm + "; skipped"; !slices.Contains(tables.Notes(), want) {
		t.Errorf("notes %q, want %q", tables.Notes(), want)
	}
}
