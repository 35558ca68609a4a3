package archiveddb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/rotation"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
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
	in := CreateInput(rotation.Spec{Name: "x-votes-2026-12", Tags: map[string]string{"b": "2", "a": "1"}})
	if in.BillingMode != types.BillingModePayPerRequest || in.StreamSpecification.StreamViewType != types.StreamViewTypeNewAndOldImages ||
		!aws.ToBool(in.DeletionProtectionEnabled) || aws.ToString(in.Tags[0].Key) != "a" {
		t.Errorf("create input %+v", in)
	}
	if got := aws.ToString(in.KeySchema[0].AttributeName) + "/" + aws.ToString(in.KeySchema[1].AttributeName); got != "pk/sk" {
		t.Errorf("key schema %s, want pk/sk (dynamostore's ledger)", got)
	}
	p := CreateInput(rotation.Spec{Name: "x", Capacity: &rotation.Capacity{Read: 5, Write: 10}})
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
	spec := rotation.Spec{Name: name, Month: "2026-11", Tags: map[string]string{"app": "ddbpipe"}}
	tb, created, err := tables.Ensure(ctx, spec)
	if err != nil || !created {
		t.Fatalf("ensure: %v created=%v", err, created)
	}
	t.Logf("local server notes: %q", tables.Notes())
	if tb.StreamARN == "" || !tb.StreamEnabled || tb.Capacity != nil {
		t.Errorf("table %+v, want an on-demand table with its stream", tb)
	}
	if _, created, err := tables.Ensure(ctx, spec); err != nil || created {
		t.Errorf("second ensure: %v created=%v", err, created)
	}
	list, err := tables.List(ctx, name[:len(name)-7])
	if err != nil || len(list) != 1 || list[0].Name != name {
		t.Errorf("list: %v %+v", err, list)
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
		key, _ := archive.KeyJSON(item, "pk", "sk")
		want[key], _ = archive.Checksum(item)
		if len(reqs) == 25 {
			flush()
		}
	}
	flush()
	scan, err := tables.Scan(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep := archive.Verify(want, scan.State); !rep.OK() || len(scan.Images) != n {
		t.Errorf("scan state: %s; %d images", rep, len(scan.Images))
	}
	t.Logf("parallel scan (%d segments): %d items in %s (%.0f items/s)", scan.Segments, n, scan.Took.Round(time.Millisecond), float64(n)/scan.Took.Seconds())

	if err := tables.DisableStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	recs, err := streams.Records(ctx, tb.StreamARN)
	if err != nil || len(recs) != n {
		t.Fatalf("stream records: %v, %d, want %d", err, len(recs), n)
	}
	t.Logf("read the disabled stream's %d records in %s", len(recs), time.Since(start).Round(time.Millisecond))
	after, _, _ := tables.Ensure(ctx, spec)
	if after.StreamEnabled {
		t.Error("stream still enabled")
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

// A protected table refuses deletion (where the server knows protection).
func TestProtectedTableRefusesDelete(t *testing.T) {
	tables, _, _ := localTables(t)
	ctx := context.Background()
	name := fmt.Sprintf("dt-%d-%d-votes-2026-10", time.Now().UnixNano()%1e7, seq.Add(1))
	tb, _, err := tables.Ensure(ctx, rotation.Spec{Name: name, Month: "2026-10"})
	if err != nil {
		t.Fatal(err)
	}
	if !tb.DeletionProtection {
		t.Skipf("the local server does not keep deletion protection (notes %q)", tables.Notes())
	}
	if err := tables.Delete(ctx, name); err == nil {
		t.Fatal("deleted a protected table")
	}
	if err := tables.Protect(ctx, name, false); err != nil {
		t.Fatal(err)
	}
	if err := tables.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
}
