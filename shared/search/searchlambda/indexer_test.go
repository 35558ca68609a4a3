package searchlambda

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/objects/objectsddb"
	"github.com/ddbpipe/ddbpipe/shared/platform/ddbstream/ddbstreamtest"
	"github.com/ddbpipe/ddbpipe/shared/search"
)

// index records what the handler sends; down makes every request fail.
type index struct {
	ops  []search.Op
	down bool
}

func (x *index) Bulk(_ context.Context, _ string, ops []search.Op) ([]search.Outcome, error) {
	if x.down {
		return nil, fmt.Errorf("%w: connection refused", search.ErrUnavailable)
	}
	x.ops = append(x.ops, ops...)
	out := make([]search.Outcome, len(ops))
	for i := range out {
		out[i].Status = 201
	}
	return out, nil
}

type inline struct{}

func (inline) Fetch(_ context.Context, r objects.Record, _ int64) (objects.Object, error) {
	return objects.Object{Record: r.Meta(), Body: r.Data}, nil
}

func image(t *testing.T, item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	return ddbstreamtest.Image(t, item)
}

func record(name, seq string, newImage, oldImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventID: "e" + seq, EventName: name, Change: events.DynamoDBStreamRecord{
		SequenceNumber: seq, NewImage: newImage, OldImage: oldImage,
		ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1_800_000_000, 0)},
	}}
}

func TestIndexerReadsTheLatestItemsOnly(t *testing.T) {
	store := objectsddb.New(nil, "objects")
	note := objects.Record{Key: "notes/a b#1.txt", Version: 2, Kind: objects.Inline, Size: 5, ContentType: "text/plain",
		Codec: objects.Identity, Data: []byte("hello"), SHA256: objects.SumOf([]byte("hello")), WriteID: "w1", CreatedAt: time.Unix(1_799_999_000, 0)}
	latest, history := store.CommitItems(note)
	gone := objects.Record{Key: "gone", Version: 4, Deleted: true, CreatedAt: time.Unix(1_799_999_500, 0)}
	tomb, _ := store.CommitItems(gone)

	tests := []struct {
		name     string
		records  []events.DynamoDBEventRecord
		down     bool
		want     []string // documents sent: key@external version
		failedAt string
	}{
		{
			name: "puts and deletes of v0; history skipped",
			records: []events.DynamoDBEventRecord{
				record("INSERT", "1", image(t, latest), nil),
				record("INSERT", "2", image(t, history), nil),
				record("MODIFY", "3", image(t, tomb), nil),
			},
			want: []string{"notes/a b#1.txt@4", "gone@9"},
		},
		{
			name: "a removed v0 deletes its document",
			records: []events.DynamoDBEventRecord{
				record("REMOVE", "1", nil, image(t, latest)),
			},
			want: []string{"notes/a b#1.txt@5"},
		},
		{
			name: "a record without its image fails the batch there",
			records: []events.DynamoDBEventRecord{
				record("INSERT", "1", image(t, latest), nil),
				record("MODIFY", "2", nil, nil),
				record("MODIFY", "3", image(t, tomb), nil),
			},
			want:     []string{"notes/a b#1.txt@4"},
			failedAt: "2",
		},
		{
			name:     "an unknown event name fails the batch there",
			records:  []events.DynamoDBEventRecord{record("TRUNCATE", "7", image(t, latest), nil)},
			failedAt: "7",
		},
		{
			name:     "the engine down: the whole batch is retried",
			records:  []events.DynamoDBEventRecord{record("INSERT", "5", image(t, latest), nil), record("INSERT", "6", image(t, tomb), nil)},
			down:     true,
			failedAt: "5",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &index{down: tt.down}
			h := &Indexer{Indexer: &search.Indexer{Index: x, Payloads: inline{}, Target: "objects-write", Attempts: 2}}
			resp, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: tt.records})
			if err != nil {
				t.Fatalf("Handle returned an error: %v", err)
			}
			var got []string
			for _, op := range x.ops {
				got = append(got, fmt.Sprintf("%s@%d", op.Doc.Key, op.Version))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("documents %v, want %v", got, tt.want)
			}
			failed := ""
			if len(resp.BatchItemFailures) > 0 {
				failed = resp.BatchItemFailures[0].ItemIdentifier
			}
			if failed != tt.failedAt {
				t.Errorf("failed at %q, want %q", failed, tt.failedAt)
			}
		})
	}
}

func TestIndexerIndexesTheTextOfInlineDocuments(t *testing.T) {
	store := objectsddb.New(nil, "objects")
	rec := objects.Record{Key: "a.md", Version: 1, Kind: objects.Inline, Size: 12, ContentType: "text/markdown",
		Codec: objects.Identity, Data: []byte("# invoice 42"), SHA256: objects.SumOf([]byte("# invoice 42")), WriteID: "w"}
	latest, _ := store.CommitItems(rec)
	x := &index{}
	h := &Indexer{Indexer: &search.Indexer{Index: x, Payloads: inline{}, Target: "t"}}
	if _, err := h.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record("INSERT", "1", image(t, latest), nil)}}); err != nil {
		t.Fatal(err)
	}
	if len(x.ops) != 1 || x.ops[0].Doc.Text != "# invoice 42" || x.ops[0].Doc.TextState != search.TextIndexed || x.ops[0].Doc.SHA256 != rec.SHA256.String() {
		t.Fatalf("ops %+v, want the document with its text", x.ops)
	}
}
