package archiveddb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// leaseTable creates a table with the counters table's key (pk, sk).
func leaseTable(t *testing.T) (*Leases, *dynamodb.Client) {
	t.Helper()
	tables, _, db := localTables(t)
	ctx := context.Background()
	name := fmt.Sprintf("lease-%d-%d-counters", time.Now().UnixNano()%1e7, seq.Add(1))
	in := CreateInput(archive.Spec{Name: name})
	in.StreamSpecification, in.DeletionProtectionEnabled = nil, aws.Bool(false)
	if _, err := db.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	if _, err := tables.waitActive(ctx, name); err != nil {
		t.Fatal(err)
	}
	return &Leases{DB: db, Table: name}, db
}

// The lease's conditional writes against DynamoDB Local: a live lease is
// never taken from its run, a lapsed one is, and the refused write says
// who holds it (the item DynamoDB returns with the refusal); a renewal or a
// release by a run that lost the lease changes nothing.
func TestLeaseConditions(t *testing.T) {
	leases, db := leaseTable(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC)
	a := archive.Lease{Table: "app-votes-2026-11", Holder: "the scheduled rotator", Run: "run-a", Since: t0, Step: archive.StepLease, Expires: t0.Add(15 * time.Minute)}
	b := archive.Lease{Table: a.Table, Holder: "ddbpipe tables rotate", Run: "run-b", Since: t0.Add(time.Minute), Step: archive.StepLease, Expires: t0.Add(16 * time.Minute)}

	if other, taken, err := leases.Take(ctx, a, t0); err != nil || !taken || !other.IsZero() {
		t.Fatalf("take a free lease: %+v %v %v", other, taken, err)
	}
	a.Step, a.Expires = archive.StepDrain, t0.Add(20*time.Minute)
	if other, kept, err := leases.Renew(ctx, a); err != nil || !kept || !other.IsZero() {
		t.Fatalf("renew: %+v %v %v", other, kept, err)
	}
	// Another run while a's is live: refused, told who holds it.
	other, taken, err := leases.Take(ctx, b, t0.Add(time.Minute))
	if err != nil || taken {
		t.Fatalf("take a held lease: taken %v, %v; want refused", taken, err)
	}
	if !sameLease(other, a) {
		t.Errorf("the holder: %+v, want %+v", other, a)
	}
	// a takes its own lease again: it is its own.
	if other, taken, err := leases.Take(ctx, a, t0.Add(2*time.Minute)); err != nil || !taken || !other.IsZero() {
		t.Errorf("the holder takes its lease again: %+v %v %v", other, taken, err)
	}
	// Once a's lapsed, b takes it over and is told whose it was.
	other, taken, err = leases.Take(ctx, b, a.Expires)
	if err != nil || !taken || !sameLease(other, a) {
		t.Fatalf("take a lapsed lease: %+v %v %v; want taken over from %+v", other, taken, err, a)
	}
	// a comes back: its renewal is refused with b's lease, its release is
	// a no-op.
	if other, kept, err := leases.Renew(ctx, a); err != nil || kept || !sameLease(other, b) {
		t.Errorf("renew a lost lease: %+v %v %v; want refused, held by %+v", other, kept, err, b)
	}
	if err := leases.Release(ctx, a); err != nil {
		t.Errorf("release a lost lease: %v", err)
	}
	item := leaseItemOf(t, db, leases.Table, a.Table)
	if got := leaseOf(item); !sameLease(got, b) {
		t.Errorf("lease %+v, want b's left as it is", got)
	}
	if ttl, ok := item["ttl"].(*types.AttributeValueMemberN); !ok || ttl.Value != fmt.Sprint(b.Expires.Add(ttlAfterLapse).Unix()) {
		t.Errorf("ttl %v, want a week after the lease lapses", item["ttl"])
	}
	if err := leases.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if item := leaseItemOf(t, db, leases.Table, a.Table); item != nil {
		t.Errorf("after the release: %v, want no lease", item)
	}
	// Renewing a released lease does not bring it back.
	if other, kept, err := leases.Renew(ctx, b); err != nil || kept || !other.IsZero() {
		t.Errorf("renew a released lease: %+v %v %v; want refused, nobody holding it", other, kept, err)
	}
	if item := leaseItemOf(t, db, leases.Table, a.Table); item != nil {
		t.Errorf("a renewal wrote %v", item)
	}
}

// Runs racing for a free lease: exactly one takes it; each of the others
// is told it is held, and by whom.
func TestLeaseRace(t *testing.T) {
	leases, _ := leaseTable(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 3, 1, 30, 0, 0, time.UTC)
	const runs = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	holders := map[string]int{}
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := archive.Lease{Table: "app-votes-2026-11", Holder: fmt.Sprintf("run %d", i), Run: fmt.Sprintf("run-%d", i), Since: t0, Expires: t0.Add(time.Minute)}
			other, taken, err := leases.Take(ctx, l, t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("run %d: %v", i, err)
			case taken:
				winners = append(winners, l.Run)
			default:
				holders[other.Run]++
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 || holders[winners[0]] != runs-1 {
		t.Errorf("winners %v, told held by %v; want one winner, named to the %d others", winners, holders, runs-1)
	}
}

func sameLease(a, b archive.Lease) bool {
	return a.Table == b.Table && a.Holder == b.Holder && a.Run == b.Run && a.Step == b.Step && a.Since.Equal(b.Since) && a.Expires.Equal(b.Expires)
}

func leaseItemOf(t *testing.T, db *dynamodb.Client, table, ledger string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: leaseKey(ledger), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}
