package objectsddb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectstest"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

const (
	KB = objectstest.KB
	MB = objectstest.MB
)

var seq atomic.Int64

// newClient returns a client of the local DynamoDB; opts adjust it.
func newClient(t *testing.T, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	st := stacktest.Need(t)
	cfg := stacktest.Config(t, st, nil)
	if len(opts) == 0 {
		return awsenv.DynamoDB(cfg)
	}
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }}, opts...)...)
}

// newTable creates a table of the objects table's schema, deleted when the
// test ends.
func newTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	return createTable(t, db, nil)
}

// newIndexedTable is a new objects table with the listing index, as
// template.yaml declares it (tests/ holds the two equal).
func newIndexedTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	return createTable(t, db, []types.GlobalSecondaryIndex{{
		IndexName: aws.String(IndexName),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrListShard), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: IndexProjection},
	}})
}

func createTable(t *testing.T, db *dynamodb.Client, gsis []types.GlobalSecondaryIndex) string {
	t.Helper()
	name := fmt.Sprintf("objects-%d-%d", time.Now().UnixNano()%1e7, seq.Add(1))
	ctx := context.Background()
	defs := []types.AttributeDefinition{
		{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
	}
	if len(gsis) > 0 {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(attrListShard), AttributeType: types.ScalarAttributeTypeN})
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: gsis,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() { db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
	return name
}

// newStore is a store over a new table, with short backoffs.
func newStore(t *testing.T) (*Store, *dynamodb.Client) {
	t.Helper()
	db := newClient(t)
	s := New(db, newTable(t, db))
	s.Backoff.Base, s.Backoff.Max = time.Millisecond, time.Millisecond
	return s, db
}

// inline is an inline record of body.
func inline(key string, version int64, body []byte) objects.Record {
	return objects.Record{
		Key: key, Version: version, Kind: objects.Inline, Size: int64(len(body)), SHA256: objects.SumOf(body),
		ContentType: "text/plain", Codec: objects.Identity, Data: body, WriteID: fmt.Sprintf("w%d", version),
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, int(version), time.UTC),
	}
}

// scan returns every item of the table.
func scan(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		items = append(items, page.Items...)
	}
	return items
}

func ptr[T any](v T) *T { return &v }

// The proofs' byte generators, shared with the adapters' tests.
var (
	random = objectstest.Random
	text   = objectstest.Text
)
