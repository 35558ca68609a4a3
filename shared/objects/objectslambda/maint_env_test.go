package objectslambda_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectss3"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

var seq atomic.Int64

// env is one objects store on the local servers: a table with its stream,
// a versioned bucket, the domain's store over them, and the maintenance
// side (reaper, sweeper) with a clock the test moves.
type env struct {
	db        *dynamodb.Client
	streams   *dynamodbstreams.Client
	s3        *s3.Client
	table     string
	streamARN string
	bucket    string

	items *objectsddb.Store
	blobs *objectss3.Store
	store *objects.Store
	refs  *objectsddb.Refs
	lst   *objectss3.Bucket

	mu  sync.Mutex
	now time.Time // the sweeper's clock; zero: the real time
}

const grace = 10 * time.Minute

func newEnv(t *testing.T) *env {
	t.Helper()
	// The servers of the local stack, straight (no proxies, no runner):
	// the table, its stream and the bucket are the test's own.
	cfg := stacktest.Config(t, upStack(t).Servers, nil)
	e := &env{db: awsenv.DynamoDB(cfg), streams: dynamodbstreams.NewFromConfig(cfg), s3: awsenv.S3(cfg)}
	ctx := context.Background()
	n := seq.Add(1)
	e.table = fmt.Sprintf("objmaint-%d-%d", time.Now().UnixNano()%1e7, n)
	out, err := e.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(e.table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	e.streamARN = aws.ToString(out.TableDescription.LatestStreamArn)
	t.Cleanup(func() {
		e.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(e.table)})
	})
	e.bucket = fmt.Sprintf("objmaint-%d-%d", time.Now().UnixNano()%1e8, n)
	if _, err := e.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := e.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket: aws.String(e.bucket), VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled},
	}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	e.items = objectsddb.New(e.db, e.table)
	e.items.Backoff.Base, e.items.Backoff.Max = time.Millisecond, time.Millisecond
	e.blobs = objectss3.FromClient(e.s3, e.bucket)
	var ids atomic.Int64
	e.store = &objects.Store{
		Items: e.items, Chunks: e.items, Blobs: e.blobs, Policy: objects.Policy{ChunkSize: 8 << 10},
		NewID: func() string { return fmt.Sprintf("w%d%06d", n, ids.Add(1)) },
		Log:   testLogger(t),
	}
	e.refs = objectsddb.NewRefs(e.db, e.table)
	e.lst = objectss3.NewBucket(e.s3, e.bucket)
	return e
}

// advance sets the sweeper's clock d past the real time.
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = time.Now().Add(d)
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.now.IsZero() {
		return time.Now()
	}
	return e.now
}

func (e *env) sweeper(t *testing.T) *objects.Sweeper {
	return &objects.Sweeper{Table: e.refs, Blobs: e.lst, Grace: grace, UploadGrace: 2 * grace, Now: e.clock, Log: testLogger(t)}
}

func (e *env) reaper(t *testing.T) *objectslambda.Reaper {
	return &objectslambda.Reaper{Reaper: &objects.Reaper{Store: e.store, Bucket: e.bucket}, Log: testLogger(t)}
}

// sweep runs a sweep that must finish.
func (e *env) sweep(t *testing.T) objects.SweepResult {
	t.Helper()
	res := e.sweeper(t).Sweep(context.Background())
	if res.Err != nil || res.DeleteErr != nil {
		t.Fatalf("sweep: %v; deletes: %v", res.Err, res.DeleteErr)
	}
	return res
}

// check returns the invariants' report.
func (e *env) check(t *testing.T) objects.Report {
	t.Helper()
	r, err := objects.Check(context.Background(), e.refs, e.lst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustHold fails unless no reference dangles (and, if clean, no orphan
// is left).
func (e *env) mustHold(t *testing.T, clean bool) objects.Report {
	t.Helper()
	r := e.check(t)
	err := r.DanglingErr()
	if clean {
		err = r.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}

func ptr[T any](v T) *T { return &v }
