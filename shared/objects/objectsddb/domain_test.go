package objectsddb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// The domain's own proofs (objects' store_test.go), rerun with objects.Store
// over this adapter on DynamoDB Local and objectss3 on the local S3 server.

type domain struct {
	store *objects.Store
	table *Store
	db    *dynamodb.Client
	blobs *objectss3.Store
	lst   *objectss3.Bucket
}

func newDomain(t *testing.T, configure ...func(*objects.Store)) *domain {
	t.Helper()
	table, db := newStore(t)
	cfg := stacktest.Config(t, stacktest.Need(t), nil)
	c := awsenv.S3(cfg)
	bucket := fmt.Sprintf("objects-%d-%d", time.Now().UnixNano()%1e8, seq.Add(1))
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket: aws.String(bucket), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	d := &domain{table: table, db: db, blobs: objectss3.FromClient(c, bucket), lst: objectss3.NewBucket(c, bucket)}
	var ids atomic.Int64
	d.store = &objects.Store{
		Items: table, Chunks: table, Blobs: d.blobs,
		NewID: func() string { return fmt.Sprintf("w%06d", ids.Add(1)) },
	}
	for _, f := range configure {
		f(d.store)
	}
	return d
}

// payloads is what the bucket and the chunk items hold.
type payloads struct {
	blobs, chunks             int
	orphanBlobs, orphanChunks []string // that no item references
}

// check asserts the store's invariants on the real table and bucket with
// objects.Check: every live reference's payload exists and v0 is a copy
// of its vN.
func (d *domain) check(t *testing.T) payloads {
	t.Helper()
	r, err := objects.Check(context.Background(), NewRefs(d.db, d.table.table), d.lst)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Dangling {
		t.Errorf("dangling reference: %s", s)
	}
	p := payloads{blobs: r.Blobs, chunks: r.Chunks, orphanChunks: r.OrphanChunks}
	for _, v := range r.OrphanBlobs {
		p.orphanBlobs = append(p.orphanBlobs, v.Key)
	}
	return p
}

func TestDomainRoundTripByKind(t *testing.T) {
	tests := objectstest.RoundTripCases()
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			d := newDomain(t)
			ctx := context.Background()
			const key = "docs/doc.bin"
			rec, err := d.store.Put(ctx, key, tt.Body, objects.PutOptions{KeepInTable: tt.Keep, ContentType: "application/x-test"})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Kind != tt.Want || rec.Version != 1 || rec.Size != int64(len(tt.Body)) || rec.SHA256 != objects.SumOf(tt.Body) {
				t.Errorf("Put = %s v%d %d bytes, want %s v1 %d bytes", rec.Kind, rec.Version, rec.Size, tt.Want, len(tt.Body))
			}
			for _, version := range []int64{0, 1} {
				got, err := d.store.Get(ctx, key, version)
				if err != nil {
					t.Fatalf("Get v%d: %v", version, err)
				}
				if !bytes.Equal(got.Body, tt.Body) || got.SHA256 != objects.SumOf(tt.Body) || got.ContentType != "application/x-test" || got.Kind != tt.Want {
					t.Errorf("Get v%d: %d bytes %s %s, want the %d bytes put", version, len(got.Body), got.Kind, got.ContentType, len(tt.Body))
				}
			}
			versions, err := d.store.Versions(ctx, key)
			if err != nil || len(versions) != 1 || versions[0].WriteID != rec.WriteID || versions[0].Data != nil {
				t.Errorf("Versions = %+v, %v; want version 1 without its payload", versions, err)
			}
			p := d.check(t)
			if p.blobs != tt.WantBlobs || p.chunks != tt.WantChunks {
				t.Errorf("%d blobs and %d chunks, want %d and %d", p.blobs, p.chunks, tt.WantBlobs, tt.WantChunks)
			}
			if len(p.orphanBlobs)+len(p.orphanChunks) > 0 {
				t.Errorf("orphans: %v %v", p.orphanBlobs, p.orphanChunks)
			}
		})
	}
}

// Concurrent updaters of one key, in rounds: all read the same version, all
// write based on it; exactly one wins each round, no update is lost and
// the history is complete. Without If-Match every write lands, each on a
// version of its own.
func TestDomainConcurrentUpdaters(t *testing.T) {
	const writers, rounds = 4, 12
	tests := []struct {
		name        string
		conditional bool
	}{
		{"If-Match: one winner a round", true},
		{"unconditional: every write lands", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			d := newDomain(t, func(s *objects.Store) { s.MaxVersions = writers*rounds + 1; s.MaxAttempts = writers + 1 })
			if _, err := d.store.Put(ctx, "shared", []byte("v1"), objects.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			want := map[int64][]byte{1: []byte("v1")}
			latest := int64(1)
			for round := range rounds {
				var wins, conflicts atomic.Int32
				var mu sync.Mutex
				var wg sync.WaitGroup
				start := make(chan struct{})
				for w := range writers {
					body := fmt.Appendf(nil, "round %d writer %d ", round, w)
					if w%2 == 1 { // half the writers go to S3: their lost blobs must be cleaned
						body = append(body, random(16*KB, uint64(round*writers+w))...)
					}
					o := objects.PutOptions{}
					if tt.conditional {
						o.IfMatch = ptr(latest)
					}
					wg.Go(func() {
						<-start
						r, err := d.store.Put(ctx, "shared", body, o)
						switch {
						case err == nil:
							wins.Add(1)
							mu.Lock()
							if _, dup := want[r.Version]; dup {
								t.Errorf("round %d: version %d written twice", round, r.Version)
							}
							want[r.Version] = body
							mu.Unlock()
						case errors.Is(err, objects.ErrConflict):
							conflicts.Add(1)
						default:
							t.Errorf("round %d writer %d: %v", round, w, err)
						}
					})
				}
				close(start)
				wg.Wait()
				wantWins := int32(1)
				if !tt.conditional {
					wantWins = writers
				}
				if wins.Load() != wantWins || wins.Load()+conflicts.Load() != writers {
					t.Fatalf("round %d: %d wins and %d conflicts, want %d wins", round, wins.Load(), conflicts.Load(), wantWins)
				}
				latest += int64(wantWins)
			}
			versions, err := d.store.Versions(ctx, "shared")
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(versions)) != latest || versions[0].Version != latest || versions[len(versions)-1].Version != 1 {
				t.Fatalf("got %d versions from %d down to %d, want %d down to 1", len(versions), versions[0].Version, versions[len(versions)-1].Version, latest)
			}
			for v, body := range want {
				got, err := d.store.Get(ctx, "shared", v)
				if err != nil || !bytes.Equal(got.Body, body) {
					t.Errorf("version %d: %v, want the winner's body", v, err)
				}
			}
			if got, err := d.store.Get(ctx, "shared", 0); err != nil || !bytes.Equal(got.Body, want[latest]) {
				t.Errorf("latest: %v, want version %d's body", err, latest)
			}
			if p := d.check(t); len(p.orphanBlobs)+len(p.orphanChunks) > 0 {
				t.Errorf("orphans: %v %v", p.orphanBlobs, p.orphanChunks)
			}
		})
	}
}

// A delete of an object with more history than a transaction holds: the
// tombstone and 99 history items together, the rest after.
func TestDomainDeleteLongHistory(t *testing.T) {
	ctx := context.Background()
	d := newDomain(t, func(s *objects.Store) { s.MaxVersions = 150 })
	const n = 105
	for i := range n {
		if _, err := d.store.Put(ctx, "k", []byte(fmt.Sprint(i)), objects.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := d.store.Delete(ctx, "k", objects.DeleteOptions{}); err != nil || v != n {
		t.Fatalf("Delete = %d, %v; want %d", v, err, n)
	}
	l, err := d.table.List(ctx, "k")
	if err != nil || !l.Exists || !l.Latest.Deleted || l.Latest.Version != n || len(l.History) != 0 {
		t.Errorf("after delete: %+v, %v; want only the tombstone of v%d", l, err, n)
	}
	if _, err := d.store.Get(ctx, "k", 0); !errors.Is(err, objects.ErrNotFound) {
		t.Errorf("Get after delete: %v, want ErrNotFound", err)
	}
	if r, err := d.store.Put(ctx, "k", []byte("again"), objects.PutOptions{IfMatch: ptr[int64](0)}); err != nil || r.Version != n+1 {
		t.Errorf("create after delete: v%d, %v; want v%d", r.Version, err, n+1)
	}
}
